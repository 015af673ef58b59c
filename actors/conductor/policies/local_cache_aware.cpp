// local_cache_aware: the lowest predicted TTFT (queue, loads, compute, hand-off) when each
// instance reuses only the prefix its own node holds; ties: the lowest index (among coupled
// instances, the one holding fewer requests). Policy v0 took the
// longest local prefix first and the queue only to break ties; this weighs the two in time.
#include "actors/conductor/policies/policies.hpp"

namespace crescent::policies {

std::optional<prefill_choice> local_cache_aware(const schedule_view& v, const request_view& r,
                                                const prefix_match& m, policy_state&) {
  std::optional<prefill_choice> best;
  for (uint32_t i = 0; i < v.prefill.size(); ++i) {
    if (!has_room(v, i))
      continue;
    auto c = local_choice(v, r, i, m);
    if (!best || c.ttft_ns < best->ttft_ns ||
        (c.ttft_ns == best->ttft_ns && lighter(v, i, best->instance)))
      best = c;
  }
  return best;
}

} // namespace crescent::policies
