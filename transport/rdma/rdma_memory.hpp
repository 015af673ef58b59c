// Memory registrations of the engine's regions: every region is a memory region (ibv_mr) on
// every opened device, so that it can be the local buffer of this engine's RDMA work and the
// target of peers' work through any device pair. A device that refuses a region (the
// locked-memory limit, a device out of translation entries) only leaves that device out for
// it: the region stays registered with the engine, usable over the other devices, shared
// memory and TCP, and RDMA work on it through no device says why. Built only with rdma-core.
#pragma once

#include "transport/rdma/rdma_device.hpp"
#include "transport/region_handle.hpp"

#include <caf/error.hpp>

#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace crescent::transport::rdma {

/// One region's memory as the devices know it. Deregistered when the last holder lets go:
/// the registry, or work in flight that took a reference.
struct registration {
  uint64_t region_id = 0;
  std::byte* base = nullptr;
  uint64_t length = 0;
  int numa_node = -1;
  std::vector<ibv_mr*> mrs;  // by device index; null where that device refused the memory
  std::vector<size_t> order; // device indices to use for this memory, best first (with an mr)
  std::string refusals;      // why devices refused it, for messages; empty if none did

  /// Whether any device took the memory.
  bool usable() const { return !order.empty(); }

  registration() = default;
  registration(const registration&) = delete;
  registration& operator=(const registration&) = delete;
  ~registration();
};

class memory_registry {
 public:
  /// Device indices, best first, for memory on a NUMA node (-1: unknown).
  using order_function = std::function<std::vector<size_t>(int numa_node)>;

  /// Registers [base, base + region.length) with every device, for local and remote reads and
  /// writes. A device that refuses it is left out for this region, with its reason kept (see
  /// above); none taking it is not an error either.
  void add(const region_handle& region, std::byte* base,
           const std::vector<std::unique_ptr<device>>& devices, const order_function& order);

  /// Forgets a region; its memory regions go once no work holds them.
  void remove(uint64_t region_id);

  std::shared_ptr<const registration> find(uint64_t region_id) const;

  /// The region's remote keys, named by device, its preferred device first.
  std::vector<region_key> keys_of(uint64_t region_id,
                                  const std::vector<std::unique_ptr<device>>& devices) const;

  void clear();

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<const registration>> regions_;
};

} // namespace crescent::transport::rdma
