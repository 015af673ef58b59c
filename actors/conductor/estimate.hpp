// What every policy shares: the predicted TTFT of a prefill choice, the decode choice by
// predicted TBT within KV memory, and admission against the SLOs.
#pragma once

#include "actors/conductor/view.hpp"

#include <optional>

namespace crescent {

/// A prefill instance, what it would load, and the TTFT that gives.
struct prefill_choice {
  uint32_t instance = 0;
  uint32_t reuse_blocks = 0; // leading blocks loaded
  uint32_t local_blocks = 0; // of those, on its node
  bool pull = false;         // the others come from another node
  uint32_t pull_from = 0;    // that node
  uint64_t ttft_ns = 0;
  uint64_t handoff_burst_ns = 0; // the end of its hand-off that crowds the decode NIC
};

/// Whether the instance takes new jobs: alive, queue not full.
bool has_room(const schedule_view& v, uint32_t instance);

/// Between two coupled instances that a policy finds equal, whether `a` holds fewer requests in
/// its batch than `b` (a coupled instance's decodes slow its prefills). False when not coupled:
/// ties then go to the lowest index.
bool lighter(const schedule_view& v, uint32_t a, uint32_t b);

/// Tokens a prefill reuses from `blocks` leading blocks: never its last token.
uint32_t reused_tokens(const schedule_view& v, const request_view& r, uint32_t blocks);

/// What a prefill loads: `local` blocks from its own node, then `pulled` from node `holder`;
/// of each, those read back from that node's SSD tier first.
struct prefix_load {
  uint32_t local = 0;
  uint32_t local_on_ssd = 0;
  uint32_t pulled = 0;
  uint32_t pulled_on_ssd = 0;
  uint32_t holder = 0;
};

/// Queue, loads (the instance's own blocks, then those pulled from the holder, behind what
/// others read from it; drive reads before each), compute and the hand-off to decode; and the
/// hand-off's burst (time_model::handoff).
struct ttft_estimate {
  uint64_t ttft_ns = 0;
  uint64_t handoff_burst_ns = 0;
};
ttft_estimate predicted_ttft(const schedule_view& v, const request_view& r, uint32_t instance,
                             const prefix_load& load);

/// Reusing only what the instance's own node holds.
prefill_choice local_choice(const schedule_view& v, const request_view& r, uint32_t instance,
                            const prefix_match& m);

/// The decode instance with the lowest predicted TBT once this request joins (at the time it
/// would arrive there, under predicted_load), among those with KV memory for it; or, within
/// decode_tbt_slack of that TBT, the one whose NIC the fewest other hand-offs crowd during this
/// one's burst (ties by TBT, then index).
struct decode_choice {
  uint32_t instance = 0;
  uint64_t tbt_ns = 0;
  uint64_t crowded_ns = 0; // of this hand-off's burst, the time others' bursts overlap it
};
std::optional<decode_choice> choose_decode(const schedule_view& v, const request_view& r,
                                           const prefill_choice& prefill);

/// The decision for a prefill choice (none: no instance with room): decode, then admission.
decision complete(const schedule_view& v, const request_view& r,
                  std::optional<prefill_choice> prefill);

} // namespace crescent
