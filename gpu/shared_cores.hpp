// Cores that a cluster's modeled instances share, for a profile of engines that compute on the
// host's CPU (the reference engine in one process: its workers' threads take turns on the
// cores). A compute call shares the cores with the calls running when it starts, as the
// kernel shares them among runnable threads: with k calls running on n cores (this one
// included), it runs at n / k of full speed when k > n. A call that starts later slows no
// earlier one (their ends are fixed when they start, so that a call's end is known at once:
// the actor that made it sends itself one delayed message). Devices of their own (the
// paper's GPUs) share nothing and need none. Deterministic; thread-safe, though the simulation
// runs on one thread.
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

  /// A call of `compute_ns` on a free core, starting now: returns how long it takes, slowed by
  /// the calls running now.
  uint64_t reserve(uint64_t compute_ns);

  /// The simulation's time, by the clock the cores were made with.
  int64_t now() const { return now_(); }

 private:
  uint32_t cores_;
  clock now_;
  std::mutex mutex_;
  std::vector<int64_t> running_end_ns_; // ends of the calls running, or to come
};

} // namespace crescent::gpu
