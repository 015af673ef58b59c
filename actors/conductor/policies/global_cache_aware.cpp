// global_cache_aware: Algorithm 1 of the Mooncake paper. best_len is the longest prefix any
// node holds (in DRAM or on its SSD tier, whose blocks cost a drive read first). An instance whose
// own prefix is shorter by more than the balancing threshold (best_len / own >
// kvcache_balancing_threshold, or own = 0) would pull the missing blocks from that node and store
// them in its own pool (how hot blocks gain replicas) and reuse best_len; otherwise it reuses its
// own. TTFT = T_transfer + T_queue + T_prefill (+ loads and hand-off); the lowest wins, ties to the
// lowest index.
#include "actors/conductor/policies/policies.hpp"

#include <algorithm>

namespace crescent::policies {

namespace {

prefill_choice pulling_choice(const schedule_view& v, const request_view& r, uint32_t instance,
                              const prefix_match& m) {
  const uint32_t node = v.prefill[instance].node;
  const uint32_t own = m.length[node];
  prefill_choice c;
  c.instance = instance;
  c.local_blocks = own;
  c.reuse_blocks = m.best;
  c.pull = true;
  c.pull_from = m.best_node;
  // Of the holder's blocks only on its drive, those past `own` are not known apart from the
  // rest: at most all of them are among the pulled ones, which is what is charged.
  const uint32_t pulled = m.best - own;
  const auto t = predicted_ttft(
      v, r, instance,
      {own, m.on_ssd[node], pulled, std::min(pulled, m.on_ssd[m.best_node]), m.best_node});
  c.ttft_ns = t.ttft_ns;
  c.handoff_burst_ns = t.handoff_burst_ns;
  return c;
}

bool pulls(const schedule_view& v, uint32_t own, uint32_t best) {
  if (best <= own)
    return false;
  return own == 0 ||
         static_cast<double>(best) / static_cast<double>(own) > v.kvcache_balancing_threshold;
}

} // namespace

std::optional<prefill_choice> global_cache_aware(const schedule_view& v, const request_view& r,
                                                 const prefix_match& m, policy_state&) {
  std::optional<prefill_choice> best;
  for (uint32_t i = 0; i < v.prefill.size(); ++i) {
    if (!has_room(v, i))
      continue;
    const uint32_t own = m.length[v.prefill[i].node];
    auto c = pulls(v, own, m.best) ? pulling_choice(v, r, i, m) : local_choice(v, r, i, m);
    if (!best || c.ttft_ns < best->ttft_ns)
      best = c;
  }
  return best;
}

} // namespace crescent::policies
