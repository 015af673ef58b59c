// round_robin: the next prefill instance with room after the last one chosen; it reuses what
// its own node holds.
#include "actors/conductor/policies/policies.hpp"

namespace crescent::policies {

std::optional<prefill_choice> round_robin(const schedule_view& v, const request_view& r,
                                          const prefix_match& m, policy_state& s) {
  const auto n = static_cast<uint32_t>(v.prefill.size());
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = (s.next + k) % n;
    if (!has_room(v, i))
      continue;
    s.next = (i + 1) % n;
    return local_choice(v, r, i, m);
  }
  return std::nullopt;
}

} // namespace crescent::policies
