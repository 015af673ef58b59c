#include "apps/sim/bench_sim.hpp"

#include "apps/analyze/hitrate.hpp"
#include "apps/sim/paper_cluster.hpp"
#include "apps/sim/replay_command.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace crescent::sim {

std::vector<replay::trace_record> tile_trace(const std::vector<replay::trace_record>& trace,
                                             uint32_t copies, double span_s) {
  std::vector<replay::trace_record> out;
  if (trace.empty() || copies == 0)
    return out;
  uint64_t max_id = 0;
  for (const auto& r : trace)
    for (auto id : r.hash_ids)
      max_id = std::max(max_id, id);
  // A copy starts one mean gap after the one before ends, as the next request would have come.
  const uint64_t last_ms = trace.back().timestamp_ms;
  const uint64_t gap_ms = trace.size() > 1 ? last_ms / (trace.size() - 1) : 1;
  const uint64_t period_ms = last_ms + gap_ms;
  const double total_ms = static_cast<double>(period_ms) * (copies - 1) + last_ms;
  const double scale = total_ms > 0 ? span_s * 1000 / total_ms : 1;
  for (uint32_t k = 0; k < copies; ++k)
    for (const auto& r : trace) {
      auto x = r;
      x.line = out.size() + 1;
      x.timestamp_ms = static_cast<uint64_t>(
          std::llround(static_cast<double>(r.timestamp_ms + k * period_ms) * scale));
      for (auto& id : x.hash_ids)
        id += k * (max_id + 1);
      out.push_back(std::move(x));
    }
  return out;
}

namespace {

struct row {
  std::string name;
  size_t requests = 0;
  double span_s = 0, wall_s = 0;
  uint64_t hash = 0;
  std::string json;
  size_t completed = 0;
};

caf::expected<row> run_row(const std::string& name, std::vector<replay::trace_record> trace) {
  auto cfg = paper_cluster();
  if (!cfg)
    return std::move(cfg.error());
  row r;
  r.name = name;
  r.requests = trace.size();
  auto s = simulate(*cfg, std::move(trace), {});
  if (!s)
    return std::move(s.error());
  r.span_s = s->report.trace_span_s;
  r.wall_s = s->wall.wall_s;
  r.hash = s->report.message_hash;
  r.json = format_json(s->report);
  r.completed = s->report.summary.completed;
  return r;
}

void print_row(const row& r, double target_x, double wall_max_s) {
  const double speed = r.wall_s > 0 ? r.span_s / r.wall_s : 0;
  const bool met = speed >= target_x && r.wall_s <= wall_max_s;
  fmt::print("{:<34} {:>8} {:>9.1f} {:>8.2f} {:>9.0f}x   >= {:.0f}x, <= {:.0f} s: {}\n", r.name,
             r.requests, r.span_s, r.wall_s, speed, target_x, wall_max_s, met ? "met" : "MISSED");
}

} // namespace

int bench_sim(const bench_sim_options& opt) {
  auto trace = replay::read_trace(opt.trace_path, 0);
  if (!trace) {
    fmt::print(stderr, "crescent bench sim: {}\n", describe(trace.error()));
    return 2;
  }
  fmt::print("crescent bench sim: the built-in paper cluster (16 nodes, LLaMA3-70B modeled), "
             "one core; speed = the trace's span / wall time (real time is 1x)\n");
  fmt::print("{:<34} {:>8} {:>9} {:>8} {:>10}   {}\n", "trace", "requests", "span s", "wall s",
             "speed", "target");
  int status = 0;
  auto first = run_row("synthetic", *trace);
  auto second = run_row("synthetic, again", *trace);
  if (!first || !second) {
    fmt::print(stderr, "crescent bench sim: {}\n",
               describe(first ? second.error() : first.error()));
    return 2;
  }
  const double synthetic_target = first->span_s / 10; // at most 10 s of wall time
  print_row(*first, synthetic_target, 10);
  print_row(*second, synthetic_target, 10);
  const bool same = first->json == second->json && first->hash == second->hash;
  fmt::print("determinism: JSON reports {} and message hashes {:016x} / {:016x}: {}\n",
             first->json == second->json ? "byte-identical" : "DIFFER", first->hash, second->hash,
             same ? "met" : "MISSED");
  status |= same ? 0 : 1;
  status |= first->wall_s <= 10 ? 0 : 1;
  auto hour = run_row(fmt::format("hour-long ({} tiled copies)", opt.hour_copies),
                      tile_trace(*trace, opt.hour_copies, opt.hour_span_s));
  if (!hour) {
    fmt::print(stderr, "crescent bench sim: {}\n", describe(hour.error()));
    return 2;
  }
  print_row(*hour, 120, hour->span_s / 120);
  status |= hour->wall_s > 0 && hour->span_s / hour->wall_s >= 120 ? 0 : 1;
  const double rss_gib = static_cast<double>(peak_rss_bytes()) / (1ull << 30);
  fmt::print("peak RSS {:.2f} GiB over all runs (target <= 2 GiB): {}\n", rss_gib,
             rss_gib <= 2 ? "met" : "MISSED");
  status |= rss_gib <= 2 ? 0 : 1;
  for (const auto* r : {&*first, &*second, &*hour})
    if (r->completed != r->requests)
      fmt::print("note: {} of {} requests of '{}' completed (see crescent replay --sim)\n",
                 r->completed, r->requests, r->name);
  return status;
}

int bench_agreement(const std::string& trace_path) {
  auto trace = replay::read_trace(trace_path, 0);
  if (!trace) {
    fmt::print(stderr, "crescent bench agreement: {}\n", describe(trace.error()));
    return 2;
  }
  // REFERENCE.md's table for the synthetic trace (shown for that trace only).
  const bool synthetic = trace->size() == 3993;
  const std::vector<std::pair<uint64_t, double>> rows = {
      {0, 0.6512}, {10'000'000, 0.5768}, {3'000'000, 0.3151}, {1'000'000, 0.1421}};
  fmt::print("crescent bench agreement: {} requests of {}, one pool node, one request at a "
             "time\n{:>12} {:>10} {:>10} {:>10} {:>10}\n",
             trace->size(), trace_path, "capacity", "replayed", "analysis", "reference",
             "3 decimals");
  int status = 0;
  for (const auto& [capacity, reference] : rows) {
    auto cfg = one_pool_node_cluster(capacity);
    if (!cfg) {
      fmt::print(stderr, "crescent bench agreement: {}\n", describe(cfg.error()));
      return 2;
    }
    simulate_options sopt;
    sopt.sequential = true;
    auto s = simulate(*cfg, *trace, sopt);
    const std::vector<uint64_t> capacities{capacity};
    auto a = analyze::prefix_hit_rates(*trace, capacities, replay::trace_block_tokens);
    if (!s || !a) {
      fmt::print(stderr, "crescent bench agreement: {}\n", describe(s ? a.error() : s.error()));
      return 2;
    }
    const double replayed = s->report.summary.hit_rate();
    const double analysis = (*a)[0].hit_rate();
    const auto round3 = [](double x) { return std::llround(x * 1000); };
    const bool met = round3(replayed) == round3(analysis) &&
                     (!synthetic || round3(analysis) == round3(reference));
    status |= met ? 0 : 1;
    fmt::print("{:>12} {:>10.4f} {:>10.4f} {:>10} {:>10}   ({} of {} completed, {:.1f} s wall)\n",
               capacity == 0 ? std::string{"unbounded"} : fmt::format("{}", capacity), replayed,
               analysis, synthetic ? fmt::format("{:.4f}", reference) : std::string{"-"},
               met ? "met" : "MISSED", s->report.summary.completed, trace->size(), s->wall.wall_s);
  }
  return status;
}

} // namespace crescent::sim
