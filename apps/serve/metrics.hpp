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

/// What the front door saw; safe to use from every HTTP thread.
class door_metrics {
 public:
  door_metrics();
  void http_answer(std::string_view path, int status);
  void outcome(door_outcome o);
  /// A request that ran to its end (completed): its TTFT, TBTs, tokens and cache hits.
  void observe(const replay::request_result& r);
  void in_flight(int delta);
  int64_t in_flight() const;
  void write(prom_writer& w) const;

 private:
  mutable std::mutex mu_;
  std::array<uint64_t, static_cast<size_t>(door_outcome::count)> outcomes_{};
  std::vector<std::pair<std::pair<std::string, int>, uint64_t>> http_; // (path, code) -> count
  histogram ttft_, tbt_;
  uint64_t prompt_tokens_ = 0, completion_tokens_ = 0, computed_tokens_ = 0;
  uint64_t local_hit_tokens_ = 0, remote_hit_tokens_ = 0;
  int64_t in_flight_ = 0;
};

/// The cluster's numbers, asked of its actors now (each answers within `timeout`; one that does
/// not is left out and counted in crescent_scrape_unanswered_actors).
void write_cluster_metrics(prom_writer& w, caf::actor_system& sys, cluster& cl,
                           std::chrono::milliseconds timeout);

/// The transfer engine's per-path counters.
void write_transfer_metrics(prom_writer& w, const std::vector<transport::path_metrics>& paths);

} // namespace crescent::serve
