#include "gpu/shared_cores.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace crescent::gpu {

shared_cores::shared_cores(uint32_t cores, clock now) : cores_(cores), now_(std::move(now)) {
  assert(cores >= 1 && cores <= 1024);
  assert(now_);
}

uint64_t shared_cores::reserve(uint64_t compute_ns) {
  std::lock_guard guard{mutex_};
  const int64_t now = now_();
  std::erase_if(running_end_ns_, [&](int64_t end) { return end <= now; });
  const auto running = static_cast<uint64_t>(running_end_ns_.size()) + 1; // this one too
  // n / k of a core each when k > n, in integer nanoseconds (rounded up).
  const uint64_t duration =
      running <= cores_ ? compute_ns : (compute_ns * running + cores_ - 1) / cores_;
  running_end_ns_.push_back(now + static_cast<int64_t>(duration));
  return duration;
}

} // namespace crescent::gpu
