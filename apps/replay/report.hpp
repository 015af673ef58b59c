// The summary of a replay: what people read after `crescent run`.
#pragma once

#include "messages/envelope_schemas.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace crescent::replay {

enum class outcome_status { completed, rejected, failed };

/// One request's outcome, decoded from its RequestOutcome message.
struct request_result {
  uint64_t id = 0;
  outcome_status status = outcome_status::failed;
  std::string reason;
  int64_t arrival_ns = 0;
  std::vector<int64_t> token_times_ns;
  std::vector<uint32_t> tokens;
  uint32_t prompt_tokens = 0;
  uint32_t computed_tokens = 0;
  uint32_t reused_tokens = 0;
  uint32_t remote_reused_tokens = 0; // of reused_tokens, read from another node's DRAM
  uint32_t ssd_reused_tokens = 0;    // of reused_tokens, read back from an SSD tier
  uint32_t load_misses = 0;
  uint32_t prefill_instance = 0;
  uint32_t decode_instance = 0;
  uint64_t prefill_compute_ns = 0;
  uint64_t kv_tail_ns = 0;                // the KV's arrival at decode after prefill compute ended
  uint64_t kv_busy_ns = 0;                // the time some of the KV was in flight to decode
  uint64_t prefill_queue_ns = 0;          // the prefill job's wait in its instance's queue
  std::vector<uint64_t> stage_compute_ns; // a prefill group's job: each stage's busy time
  std::vector<uint32_t> pulled_from; // the other nodes its reused blocks were read from, each once
  /// The share of the KV transfer's time that overlapped compute: 0 when sent after prefill.
  double kv_hidden() const {
    return kv_busy_ns == 0 ? 1.0
                           : 1.0 - static_cast<double>(std::min(kv_tail_ns, kv_busy_ns)) /
                                       static_cast<double>(kv_busy_ns);
  }
  uint64_t predicted_ttft_ns = 0; // the conductor's prediction at placement (0: not placed)
  uint64_t retry_after_ms = 0;    // rejected by the conductor: its retry estimate
  uint32_t retries = 0;           // attempts placed again after a failure (request_retries_max)
};

struct percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
  size_t count = 0;
};

struct replay_summary {
  size_t completed = 0, rejected = 0, failed = 0;
  size_t retried = 0, retried_completed = 0; // requests placed again after a failed attempt
  percentiles ttft_ms;
  percentiles tbt_ms; // per request: mean of its longest 10% of token intervals
  uint64_t prompt_tokens = 0;
  uint64_t computed_tokens = 0;
  uint64_t reused_tokens = 0;
  uint64_t remote_reused_tokens = 0; // of reused_tokens, from other nodes' DRAM
  uint64_t ssd_reused_tokens = 0;    // of reused_tokens, read back from SSD tiers
  uint64_t load_misses = 0;
  // The conductor's TTFT predictions against the actual TTFTs of completed requests.
  size_t predicted = 0;
  double ttft_mape = 0;
  double ttft_p90_abs_error_ms = 0;
  double hit_rate() const {
    return prompt_tokens == 0 ? 0.0 : static_cast<double>(reused_tokens) / prompt_tokens;
  }
  /// Of reused_tokens, those from the prefill node's own DRAM.
  uint64_t local_reused_tokens() const {
    return reused_tokens - std::min(reused_tokens, remote_reused_tokens + ssd_reused_tokens);
  }
};

/// Failed requests counted by reason, most frequent first (ties by reason).
std::vector<std::pair<size_t, std::string>>
failures_by_reason(const std::vector<request_result>& results);

/// Nearest-rank percentiles of `values` (sorted in place).
percentiles percentiles_of(std::vector<double>& values);

/// TBT of one request as the Mooncake paper defines it: the mean of its longest 10% of token
/// intervals (at least one interval); nullopt-like -1 for fewer than two tokens.
double request_tbt_ms(const std::vector<int64_t>& token_times_ns);

/// A request actor's RequestOutcome as a result; one that does not decode is a failed result
/// naming why (with `id` and `prompt_tokens`, which the caller knows).
request_result decode_outcome(const typed_envelope<wire::RequestOutcome>& msg, uint64_t id,
                              uint32_t prompt_tokens);

/// The mean TTFT of the completed requests, in ms (0: none completed).
double mean_ttft_ms(const std::vector<request_result>& results);

replay_summary summarize(const std::vector<request_result>& results);

std::string format_summary(const replay_summary& s);

} // namespace crescent::replay
