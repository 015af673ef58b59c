// Placement policy v0: the prefill instance whose node caches the longest prefix of the prompt,
// ties broken by the shortest queue (then the lowest id); the decode instance with the fewest
// active requests. Pure functions of the conductor's view, so they are tested directly.
// Algorithm 1 of the Mooncake paper (TTFT/TBT prediction, early rejection) replaces it later.
#pragma once

#include "actors/conductor/prefix_index.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crescent {

struct instance_view {
  uint32_t node = 0;
  uint32_t load = 0; // prefill: queued jobs; decode: active requests
  bool alive = true;
};

struct placement {
  bool placed = false;
  uint32_t prefill = 0;
  uint32_t decode = 0;
  uint32_t cached_blocks = 0;
  std::string reason; // why not, when not placed
};

placement place_v0(const prefix_index& index, std::span<const uint64_t> keys,
                   std::span<const instance_view> prefill, std::span<const instance_view> decode,
                   uint32_t prefill_queue_max);

} // namespace crescent
