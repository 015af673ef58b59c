// What a placement policy sees and decides. A policy is a function of this view (and of its own
// state, such as a seeded generator): the conductor builds the view from what it has learned,
// and tests build it by hand.
#pragma once

#include "actors/conductor/prefix_index.hpp"
#include "actors/conductor/time_model.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crescent {

enum class policy_kind {
  random,             // a live prefill instance with room, seeded
  round_robin,        // the next live one with room
  least_loaded,       // the shortest predicted queue
  local_cache_aware,  // the lowest predicted TTFT reusing only the node's own prefix
  global_cache_aware, // Algorithm 1 of the paper: a longer prefix elsewhere may be pulled
  block_cost,         // Dynamo-style: blocks to compute plus blocks queued, no time model
};

enum class admission_mode {
  none,           // admit whatever has an instance with room
  current_load,   // reject what the load of now says will miss an SLO
  predicted_load, // judge decode by its load when the request would reach it
};

/// Parses a policy or admission name ("global_cache_aware", "predicted_load", ...).
bool parse(std::string_view text, policy_kind& out);
bool parse(std::string_view text, admission_mode& out);
const char* to_string(policy_kind p);
const char* to_string(admission_mode m);

struct slo_targets {
  uint64_t ttft_ns = 30'000'000'000; // the paper's 30 s
  uint64_t tbt_ns = 100'000'000;     // the paper's threshold I, 100 ms
};

struct prefill_view {
  uint32_t node = 0;
  bool alive = true;
  uint32_t queued_jobs = 0;   // placed and not ended
  uint64_t queued_tokens = 0; // tokens those jobs compute (not reuse)
  uint64_t queue_ns = 0;      // predicted until the instance is free of them
};

/// A request a decode instance holds, as the conductor predicts it.
struct decode_load {
  uint64_t tokens = 0; // its KV at the end: prompt and output
  int64_t end_ns = 0;  // when it is predicted to finish
};

/// A placed request's hand-off while it crowds a decode instance's NIC (time_model::handoff's
/// burst), as predicted: one arriving then waits behind it or shares the link.
struct handoff_burst {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  /// The burst of `burst_ns` that ends with a first token at `arrival_ns`.
  static handoff_burst ending_at(int64_t arrival_ns, uint64_t burst_ns) {
    return {arrival_ns - static_cast<int64_t>(burst_ns), arrival_ns};
  }
};

struct decode_view {
  uint32_t node = 0;
  bool alive = true;
  uint64_t capacity_tokens = 0;
  std::span<const decode_load> requests; // those it holds or will hold
  // Empty, or: `requests` are in the order of their end_ns, and tokens_before[i] is the sum of
  // the tokens of requests [0, i) (requests.size() + 1 entries). A placement then finds the
  // batch at a time by one binary search instead of a pass over the requests.
  std::span<const uint64_t> tokens_before{};
  // The bursts of hand-offs on their way to it that have not ended (empty: none known).
  std::span<const handoff_burst> inbound{};
};

struct schedule_view {
  int64_t now_ns = 0;
  std::span<const prefill_view> prefill;
  std::span<const decode_view> decode;
  const prefix_index* index = nullptr;
  // Blocks on the nodes' SSD tiers (null: none): a node's own prefix reaches through them, and
  // its load reads them from the drive first.
  const prefix_index* ssd_index = nullptr;
  // Per node: bytes that running jobs are still reading from it (a pull from there that starts
  // now queues behind them); empty: none.
  std::span<const uint64_t> pull_backlog_bytes;
  const time_model* model = nullptr;
  slo_targets slo;
  admission_mode admission = admission_mode::predicted_load;
  double kvcache_balancing_threshold = 1.5;
  // A decode instance whose predicted TBT is within this share of the lowest (and within the
  // TBT SLO where that one is) may be chosen instead when fewer hand-offs crowd its NIC at the
  // end of this one's: 0 chooses by TBT alone.
  double decode_tbt_slack = 0;
  uint32_t prefill_queue_max = 256;
  uint32_t block_tokens = 16;
  // Coupled instances: prefill instance i is decode instance i, and a request decodes where it
  // prefills; an instance short of KV memory queues the request rather than refusing it.
  bool coupled = false;
};

struct request_view {
  uint32_t prompt_tokens = 0;
  uint32_t max_new_tokens = 0;
  std::span<const block_key> keys; // chained block keys
};

struct decision {
  bool placed = false;
  uint32_t prefill = 0;
  uint32_t decode = 0;
  uint32_t reuse_blocks = 0; // leading blocks the prefill instance should load
  bool pull = false;         // from other nodes too, storing them in its own pool
  uint32_t pull_from = 0;    // the node holding the longest prefix, when pulling
  uint32_t local_blocks = 0; // of those, the ones its node holds
  uint64_t predicted_ttft_ns = 0;
  uint64_t predicted_tbt_ns = 0;
  uint64_t handoff_burst_ns = 0; // the end of the hand-off that crowds the decode NIC
  std::string reason;            // why not, when not placed
  uint64_t retry_after_ms = 0;   // when not placed for an SLO: when it may fit
};

} // namespace crescent
