// GET /metrics of `crescent serve`: Prometheus's text format (version 0.0.4). The front door
// counts what it saw (requests by outcome, HTTP answers by code, TTFT and TBT histograms, tokens);
// the cluster's numbers are asked of its actors at each scrape (their stats messages), so that
// nothing is counted twice and a scrape shows the cluster as it is. docs/serve.md lists every
// family.
#pragma once

#include "apps/replay/report.hpp"
#include "transport/transfer_types.hpp"

#include <caf/actor_system.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crescent {
class cluster;
}

namespace crescent::serve {

/// Prometheus text: families with their HELP and TYPE, then their samples.
class prom_writer {
 public:
  using labels = std::vector<std::pair<std::string, std::string>>;
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, const labels& l, double value);
  /// A sample's series as it appears in the text: name{label="value",...}.
  static std::string series(std::string_view name, const labels& l);
  /// A sample's value as it appears in the text (integers without a fraction, +Inf, NaN).
  static std::string number(double value);
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// A histogram with fixed bucket bounds (seconds).
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);
  void observe(double value);
  void write(prom_writer& w, std::string_view name, std::string_view help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_; // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

/// How a request seen by the front door ended.
enum class door_outcome : uint8_t { completed, rejected, failed, cancelled, bad_request, count };
const char* to_string(door_outcome o);

/// How many of the last requests the recent TTFT and TBT quantiles are taken over.
inline constexpr size_t recent_requests = 256;

/// A Prometheus summary: quantiles over the last recent_requests observations (as Go's client
/// does over its window); sum and count over all of them.
struct latency_summary {
  replay::percentiles recent; // seconds; its count: the observations in the window
  double sum = 0;             // seconds
  uint64_t count = 0;
};

/// The front door's numbers at one moment: what /metrics and the status page (GET /) show.
struct door_numbers {
  std::array<uint64_t, static_cast<size_t>(door_outcome::count)> outcomes{};
  int64_t in_flight = 0;
  uint64_t prompt_tokens = 0, completion_tokens = 0, computed_tokens = 0;
  uint64_t local_hit_tokens = 0, remote_hit_tokens = 0, ssd_hit_tokens = 0;
  // Of completed requests, quantiles over the last recent_requests (nearest rank): TTFT, and TBT
  // per request as `crescent run` reports it (the mean of its longest 10% of token intervals).
  latency_summary ttft, tbt;
  // The front door's own share of what a client sees as TTFT, which `ttft` (the request actor's
  // arrival to its first token) leaves out: `door_in`, from the HTTP handler's start to the
  // request actor's arrival (the body's parse, the spawn, the request's message); `door_out`,
  // streamed requests only, from the request actor's first token to the first server-sent event
  // written (the token's message to the HTTP thread, the answer's head and the event). Before
  // `door_in` come the connection's accept and the request's read, which no clock here sees.
  latency_summary door_in, door_out;
  /// Prefix hit tokens over prompt tokens of completed requests (0 before any).
  double hit_rate() const;
};

/// What the front door saw; safe to use from every HTTP thread.
class door_metrics {
 public:
  door_metrics();
  void http_answer(std::string_view path, int status);
  void outcome(door_outcome o);
  /// A request that ran to its end (completed): its TTFT, TBTs, tokens and cache hits.
  void observe(const replay::request_result& r);
  /// The front door's share of a completed request's TTFT (door_numbers), in seconds; `out_s`
  /// negative: not streamed.
  void observe_door(double in_s, double out_s);
  void in_flight(int delta);
  int64_t in_flight() const;
  door_numbers numbers() const;
  void write(prom_writer& w) const;

 private:
  mutable std::mutex mu_;
  door_numbers counts_; // its counters; the summaries are made from the rings below
  std::vector<std::pair<std::pair<std::string, int>, uint64_t>> http_; // (path, code) -> count
  histogram ttft_, tbt_;
  // The last recent_requests TTFTs and TBTs (seconds), oldest overwritten first.
  std::vector<double> recent_ttft_, recent_tbt_, recent_in_, recent_out_;
  size_t recent_next_ttft_ = 0, recent_next_tbt_ = 0, recent_next_in_ = 0, recent_next_out_ = 0;
};

struct conductor_numbers {
  uint64_t placed = 0, rejected = 0, bad_messages = 0;
  uint32_t live_nodes = 0;
  std::vector<uint32_t> prefill_queue_jobs; // per prefill instance, as the conductor counts
  std::vector<uint32_t> decode_active;      // per decode instance, as the conductor counts
  std::vector<double> prefill_queue_s;      // per prefill instance: its predicted queue time
};

struct store_numbers {
  uint64_t complete_blocks = 0, pending_blocks = 0, lost_blocks = 0;
  uint64_t evictions_approved = 0, evictions_refused = 0, replicas_added = 0, bad_messages = 0;
};

struct owner_numbers {
  uint32_t node = 0;
  uint64_t dram_cap = 0, dram_used = 0, ssd_cap = 0, ssd_used = 0, blocks = 0;
  uint64_t evictions = 0, offloads = 0, promotions = 0, bad = 0, ssd_write_errors = 0,
           ssd_read_errors = 0;
};

struct worker_numbers {
  std::string role; // prefill, decode or coupled
  uint32_t instance = 0;
  uint32_t node = 0; // where it runs
  uint32_t queued = 0, active = 0, free_pages = 0;
  uint64_t bad = 0, compute_ns = 0, load_misses = 0, codec_errors = 0;
};

/// The cluster's numbers, asked of its actors at one moment: what /metrics and GET / show.
struct cluster_numbers {
  std::optional<conductor_numbers> conductor; // nullopt: it did not answer in time
  std::optional<store_numbers> store_master;
  std::vector<owner_numbers> owners;   // those that answered
  std::vector<worker_numbers> workers; // those that answered: prefill, decode, coupled
  uint64_t unanswered = 0;             // actors that did not answer in time
  std::vector<transport::path_metrics> transfer;
};

/// Asks every actor of `cl` for its stats now (all at once; each answers within `timeout`, one
/// that does not is left out and counted in `unanswered`).
cluster_numbers gather_cluster_numbers(caf::actor_system& sys, cluster& cl,
                                       std::chrono::milliseconds timeout);

/// The cluster's numbers in Prometheus text.
void write_cluster_metrics(prom_writer& w, const cluster_numbers& c);

/// The transfer engine's per-path counters.
void write_transfer_metrics(prom_writer& w, const std::vector<transport::path_metrics>& paths);

} // namespace crescent::serve
