#include "transport/rdma/rdma_topology.hpp"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace crescent::transport::rdma {

int numa_node_of(const void* p) {
  // get_mempolicy through syscall(): libnuma is not a dependency for one call.
  int node = -1;
  const long rc = syscall(SYS_get_mempolicy, &node, nullptr, 0UL, const_cast<void*>(p),
                          static_cast<unsigned long>(MPOL_F_NODE | MPOL_F_ADDR));
  return rc == 0 && node >= 0 ? node : -1;
}

std::vector<size_t> order_devices(const std::vector<device_view>& devices, int numa_node,
                                  const std::vector<std::string>& preferred,
                                  const std::vector<std::string>& fallback) {
  std::vector<size_t> out;
  auto index_of = [&](const std::string& name) {
    auto i = std::find_if(devices.begin(), devices.end(),
                          [&](const device_view& d) { return d.name == name; });
    return i == devices.end() ? devices.size() : static_cast<size_t>(i - devices.begin());
  };
  if (!preferred.empty() || !fallback.empty()) {
    for (const auto* list : {&preferred, &fallback})
      for (const auto& name : *list) {
        const size_t i = index_of(name);
        if (i < devices.size() && std::find(out.begin(), out.end(), i) == out.end())
          out.push_back(i);
      }
    return out;
  }
  for (size_t i = 0; i < devices.size(); ++i)
    if (numa_node >= 0 && devices[i].numa_node == numa_node)
      out.push_back(i);
  for (size_t i = 0; i < devices.size(); ++i)
    if (numa_node < 0 || devices[i].numa_node != numa_node)
      out.push_back(i);
  return out;
}

int gid_rank(const uint8_t (&gid)[16], gid_type type) {
  if (std::all_of(std::begin(gid), std::end(gid), [](uint8_t b) { return b == 0; }))
    return 0; // an empty table entry
  if (type == gid_type::infiniband)
    return 0; // not a RoCE GID
  if (type == gid_type::roce_v1)
    return 1;
  const bool v4_mapped = std::all_of(gid, gid + 10, [](uint8_t b) { return b == 0; }) &&
                         gid[10] == 0xff && gid[11] == 0xff;
  if (v4_mapped)
    return 4;
  const bool link_local = gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
  return link_local ? 2 : 3;
}

bool ports_reachable(uint8_t link_a, std::span<const uint8_t, 16> gid_a, uint8_t link_b,
                     std::span<const uint8_t, 16> gid_b) {
  constexpr uint8_t infiniband = 1;
  if (link_a != link_b)
    return false;
  return link_a != infiniband || std::equal(gid_a.begin(), gid_a.begin() + 8, gid_b.begin());
}

gid_type parse_gid_type(const std::string& text) {
  return text.find("v2") != std::string::npos ? gid_type::roce_v2 : gid_type::roce_v1;
}

} // namespace crescent::transport::rdma
