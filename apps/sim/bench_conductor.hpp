// `crescent bench conductor`: how fast the conductor decides, at the scale of the issue (64
// prefill and 64 decode instances, one per node of a 64-node cluster, the prefix index holding
// 1M blocks, prompts from the synthetic trace with their chained block keys on the paper
// cluster's model).
//
//  - the policy alone (scheduling_policy::place on a fixed view): decisions per second and the
//    p50/p99 latency of one decision, for every policy; the target, for global_cache_aware on
//    one core: at least 200,000 decisions/s and p99 at most 20 us. Baseline in the same run:
//    round_robin, which reads neither the index nor the time model.
//  - through the actor (ScheduleRequest envelopes to a spawned conductor whose index was filled
//    by PrefillReports, a driver keeping a window of requests in flight and ending old ones with
//    RequestReports): decisions per second, and the round trip one at a time; the target: at
//    least 50,000/s. Baseline in the same run: an echo actor answering the same envelopes with a
//    prebuilt reply (the mailbox and envelope floor).
// Wall-clock figures vary with the machine's load; ratios are printed per run.
#pragma once

#include "actors/conductor/view.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace crescent::sim {

struct bench_conductor_options {
  std::string trace_path = "data/synthetic_trace.jsonl";
  uint32_t instances = 64;           // prefill instances, and as many decode ones (1 to 64)
  uint64_t indexed_blocks = 1 << 20; // in the prefix index: the trace's blocks, then filler
  uint32_t decisions = 200'000;      // timed per policy
  uint32_t actor_requests = 100'000; // through the actor, per phase
};

/// A cluster's state as the benchmark decides on it: a view of `instances` prefill and decode
/// instances with queues and decode loads drawn from a fixed seed, an index of the prompts'
/// blocks (each on one to three nodes) padded to `indexed_blocks` entries, and the prompts.
struct conductor_bench_state {
  std::vector<prefill_view> prefill;
  std::vector<std::vector<decode_load>> loads;
  std::vector<std::vector<uint64_t>> tokens_before; // per instance: as the conductor keeps them
  std::vector<decode_view> decode;
  // Per decode instance: hand-offs on their way to it (0 to 3, as the conductor notes them).
  std::vector<std::vector<handoff_burst>> inbound;
  double decode_tbt_slack = 0; // the cluster file's default
  prefix_index index;
  std::shared_ptr<const time_model> model;
  std::vector<std::vector<block_key>> keys; // per prompt
  std::vector<uint32_t> prompt_tokens, max_new_tokens;
  uint64_t decode_capacity_tokens = 0;
  uint32_t block_tokens = 16;
  std::vector<std::pair<block_key, uint32_t>> holders; // (key, node) as the index learned them

  schedule_view view() const;
};

/// Errors: an unreadable trace, too many or no instances, a model that does not fit.
caf::expected<std::unique_ptr<conductor_bench_state>>
make_conductor_bench_state(const bench_conductor_options& opt);

int bench_conductor(const bench_conductor_options& opt);

} // namespace crescent::sim
