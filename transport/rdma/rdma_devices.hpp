// RDMA devices (rdma-core / libibverbs) of this machine, with what topology-aware NIC choice
// needs: the NUMA node and PCI address each device hangs off. Always callable: without an RDMA
// build or a device it returns errc::unavailable with the reason.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::transport {

struct rdma_device {
  std::string name; // e.g. mlx5_0
  uint64_t node_guid = 0;
  uint32_t ports = 0;
  int numa_node = -1; // -1: unknown
  std::string pci_address;
};

bool built_with_rdma();

/// The devices this path can use. Devices of another transport than InfiniBand's (iWARP,
/// usNIC: see rdma_policy.hpp) are left out; `skipped`, if given, gets "name: reason" for each.
/// unavailable, with those reasons, if no device is left.
caf::expected<std::vector<rdma_device>> rdma_devices(std::vector<std::string>* skipped = nullptr);

} // namespace crescent::transport
