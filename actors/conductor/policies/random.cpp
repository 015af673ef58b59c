// random: a prefill instance with room, uniformly from a seeded generator; it reuses what its
// own node holds. The paper's worst baseline (Fig. 5).
#include "actors/conductor/policies/policies.hpp"

#include <vector>

namespace crescent::policies {

std::optional<prefill_choice> random(const schedule_view& v, const request_view& r,
                                     const prefix_match& m, policy_state& s) {
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < v.prefill.size(); ++i)
    if (has_room(v, i))
      open.push_back(i);
  if (open.empty())
    return std::nullopt;
  // Not std::uniform_int_distribution: its draws differ between standard libraries.
  return local_choice(v, r, open[s.rng() % open.size()], m);
}

} // namespace crescent::policies
