// least_loaded: the prefill instance whose queue is predicted to drain first (ties: the lowest
// index; among coupled instances, the one holding fewer requests), cache ignored; it reuses what
// its own node holds. The paper's load balancing.
#include "actors/conductor/policies/policies.hpp"

namespace crescent::policies {

std::optional<prefill_choice> least_loaded(const schedule_view& v, const request_view& r,
                                           const prefix_match& m, policy_state&) {
  std::optional<uint32_t> best;
  for (uint32_t i = 0; i < v.prefill.size(); ++i)
    if (has_room(v, i) &&
        (!best || v.prefill[i].queue_ns < v.prefill[*best].queue_ns ||
         (v.prefill[i].queue_ns == v.prefill[*best].queue_ns && lighter(v, i, *best))))
      best = i;
  if (!best)
    return std::nullopt;
  return local_choice(v, r, *best, m);
}

} // namespace crescent::policies
