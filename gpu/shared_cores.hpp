// Cores that a cluster's modeled instances share, for a profile of engines that compute on the
// host's CPU (the reference engine in one process: its workers take turns on the actor system's
// threads). Each compute call holds one core for its duration, FIFO: it starts once the core
// that frees first is free. Devices of their own (the paper's GPUs) share nothing and need none.
// Deterministic (integer nanoseconds); thread-safe, though the simulation runs on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace crescent::gpu {

class shared_cores {
 public:
  using clock = std::function<int64_t()>; // the simulation's time, in nanoseconds

  /// Asserts 1 <= cores <= 1024 (checked where profiles are read).
  shared_cores(uint32_t cores, clock now);

  /// Reserves the core that frees first for `compute_ns` and returns how long from now until
  /// the call ends: the wait for the core, then the compute.
  uint64_t reserve(uint64_t compute_ns);

 private:
  clock now_;
  std::mutex mutex_;
  std::vector<int64_t> free_at_ns_;
};

} // namespace crescent::gpu
