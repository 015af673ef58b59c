// Topology-aware choices of the RDMA path that need no device, so that they are tested
// everywhere: which NUMA node a buffer's memory is on, which devices serve it best, and which
// GID of a RoCE port to use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crescent::transport::rdma {

/// The NUMA node holding the page at `p` (faulting it in if needed); -1 where the kernel does
/// not say (no NUMA support, or the call is filtered, as in some containers).
int numa_node_of(const void* p);

/// What device ordering needs to know of a device.
struct device_view {
  std::string name;
  int numa_node = -1; // -1: unknown
};

/// The devices to try for memory on `numa_node`, best first, as indices into `devices`.
/// Both lists empty: the devices on that NUMA node first, the others after, each group in
/// discovery order. Otherwise the preferred devices in the order given, then the fallback ones;
/// devices named in neither are not used. Names that match no device are skipped.
std::vector<size_t> order_devices(const std::vector<device_view>& devices, int numa_node,
                                  const std::vector<std::string>& preferred,
                                  const std::vector<std::string>& fallback);

enum class gid_type { infiniband, roce_v1, roce_v2 };

/// How good a GID table entry is for RoCE connections; 0: unusable. RoCE v2 is routable and
/// preferred; among v2 GIDs an IPv4-mapped one (what most RoCE fabrics are addressed by) beats
/// a global IPv6 one, which beats a link-local one.
int gid_rank(const uint8_t (&gid)[16], gid_type type);

/// Whether a port can connect to another: the same link layer and, on InfiniBand, the same
/// subnet (the GIDs' first 8 bytes), since queue pairs address InfiniBand peers by LID, which
/// means nothing beyond a subnet. RoCE GIDs are IP addresses: routing decides, not this.
bool ports_reachable(uint8_t link_a, std::span<const uint8_t, 16> gid_a, uint8_t link_b,
                     std::span<const uint8_t, 16> gid_b);

/// The type a sysfs gid_attrs/types file states ("RoCE v2", "IB/RoCE v1"); roce_v1 when unknown.
gid_type parse_gid_type(const std::string& text);

} // namespace crescent::transport::rdma
