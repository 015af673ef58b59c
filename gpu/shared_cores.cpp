#include "gpu/shared_cores.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::gpu {

shared_cores::shared_cores(uint32_t cores, clock now)
    : now_(std::move(now)), free_at_ns_(cores, 0) {
  assert(cores >= 1 && cores <= 1024);
  assert(now_);
}

uint64_t shared_cores::reserve(uint64_t compute_ns) {
  std::lock_guard guard{mutex_};
  const int64_t now = now_();
  auto core = std::min_element(free_at_ns_.begin(), free_at_ns_.end());
  const int64_t start = std::max(now, *core);
  *core = start + static_cast<int64_t>(compute_ns);
  return static_cast<uint64_t>(*core - now);
}

} // namespace crescent::gpu
