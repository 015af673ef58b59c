// The prefill choice of each placement policy: one file each. A policy picks a prefill instance
// (and what it reuses) among those with room, or none; the decode choice and admission are
// shared (estimate.hpp). To add one: a file here, a policy_kind, a line in policy.cpp.
#pragma once

#include "actors/conductor/estimate.hpp"

#include <cstdint>
#include <optional>
#include <random>

namespace crescent::policies {

/// What a policy may remember between placements.
struct policy_state {
  std::mt19937_64 rng{1};
  uint32_t next = 0; // round robin: where the next search starts
};

using prefill_fn = std::optional<prefill_choice> (*)(const schedule_view&, const request_view&,
                                                     const prefix_match&, policy_state&);

std::optional<prefill_choice> random(const schedule_view&, const request_view&, const prefix_match&,
                                     policy_state&);
std::optional<prefill_choice> round_robin(const schedule_view&, const request_view&,
                                          const prefix_match&, policy_state&);
std::optional<prefill_choice> least_loaded(const schedule_view&, const request_view&,
                                           const prefix_match&, policy_state&);
std::optional<prefill_choice> local_cache_aware(const schedule_view&, const request_view&,
                                                const prefix_match&, policy_state&);
std::optional<prefill_choice> global_cache_aware(const schedule_view&, const request_view&,
                                                 const prefix_match&, policy_state&);
std::optional<prefill_choice> block_cost(const schedule_view&, const request_view&,
                                         const prefix_match&, policy_state&);

} // namespace crescent::policies
