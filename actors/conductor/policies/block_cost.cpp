// block_cost: Dynamo's KV router, the peer to beat. Each instance costs the blocks it would
// compute (the prompt's blocks less those its node holds) plus the blocks already queued for it
// to compute; the lowest cost wins (ties: the lowest index). It weighs blocks, not time, and
// never pulls.
#include "actors/conductor/policies/policies.hpp"

namespace crescent::policies {

std::optional<prefill_choice> block_cost(const schedule_view& v, const request_view& r,
                                         const prefix_match& m, policy_state&) {
  const uint64_t block = v.block_tokens;
  const uint64_t prompt_blocks = (r.prompt_tokens + block - 1) / block;
  std::optional<uint32_t> best;
  uint64_t best_cost = 0;
  for (uint32_t i = 0; i < v.prefill.size(); ++i) {
    if (!has_room(v, i))
      continue;
    const uint64_t own = m.length[v.prefill[i].node];
    const uint64_t cost = (prompt_blocks - std::min(own, prompt_blocks)) +
                          (v.prefill[i].queued_tokens + block - 1) / block;
    if (!best || cost < best_cost) {
      best = i;
      best_cost = cost;
    }
  }
  if (!best)
    return std::nullopt;
  return local_choice(v, r, *best, m);
}

} // namespace crescent::policies
