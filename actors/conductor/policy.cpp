#include "actors/conductor/policy.hpp"

namespace crescent {

placement place_v0(const prefix_index& index, std::span<const uint64_t> keys,
                   std::span<const instance_view> prefill, std::span<const instance_view> decode,
                   uint32_t prefill_queue_max) {
  placement out;
  bool found = false;
  for (uint32_t i = 0; i < prefill.size(); ++i) {
    const auto& p = prefill[i];
    if (!p.alive || p.load >= prefill_queue_max)
      continue;
    uint32_t cached = index.cached_prefix(keys, p.node);
    bool better = !found || cached > out.cached_blocks ||
                  (cached == out.cached_blocks && p.load < prefill[out.prefill].load);
    if (better) {
      found = true;
      out.prefill = i;
      out.cached_blocks = cached;
    }
  }
  if (!found) {
    out.reason = "no live prefill instance has room in its queue";
    return out;
  }
  found = false;
  for (uint32_t i = 0; i < decode.size(); ++i) {
    if (!decode[i].alive)
      continue;
    if (!found || decode[i].load < decode[out.decode].load) {
      found = true;
      out.decode = i;
    }
  }
  if (!found) {
    out.reason = "no live decode instance";
    return out;
  }
  out.placed = true;
  return out;
}

} // namespace crescent
