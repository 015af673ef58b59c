// scale (beyond the paper): the paper cluster's setting at 16, 64 and 256 nodes (half prefill,
// half decode), the arrival rate scaled alike: the trace repeated once per 16 nodes, each copy's
// hash ids apart (no prefix is shared between copies), the copies one after another and every
// timestamp compressed so that they span the trace's own time (sim::tile_trace, as `crescent
// bench sim` makes its hour-long trace). 256 nodes is the cluster's limit (cluster_nodes_max:
// the prefix index's node sets).
//
// Measured: TTFT and effective requests (simulated, in NAME.json), and on this machine's wall
// clock (NAME.wall.json): the simulation's wall time and the conductor's decision latency, the
// wall time from the delivery of a ScheduleRequest to the conductor to the next delivery (its
// handler and the simulator's own cost of one delivery), beside the same for every other
// message as the baseline.
#include "apps/experiment/measures.hpp"
#include "apps/experiment/registry.hpp"
#include "apps/sim/bench_sim.hpp"
#include "apps/sim/sim_system.hpp"
#include "messages/envelope.hpp"
#include "messages/schema/conductor.capnp.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>

namespace crescent::experiment {

namespace {

constexpr std::array<uint32_t, 3> node_counts = {16, 64, 256};
constexpr uint32_t nodes_per_copy = 16;

// Wall time of each delivery, split by whether it was a ScheduleRequest to the conductor.
class decision_timer {
 public:
  void on_message(const sim::sim_system& sim, const sim::delivered_message& m,
                  const envelope* payload) {
    const auto now = std::chrono::steady_clock::now();
    if (started_)
      (decision_ ? decisions_ns_ : others_ns_)
          .push_back(static_cast<float>(std::chrono::nanoseconds(now - last_).count()));
    started_ = true;
    last_ = now;
    decision_ = payload != nullptr &&
                payload->schema_id() == capnp::typeId<wire::ScheduleRequest>() &&
                sim.labels()[m.receiver] == "conductor";
  }

  std::vector<float>& decisions_ns() { return decisions_ns_; }
  std::vector<float>& others_ns() { return others_ns_; }

 private:
  bool started_ = false, decision_ = false;
  std::chrono::steady_clock::time_point last_;
  std::vector<float> decisions_ns_, others_ns_;
};

double quantile_us(std::vector<float>& ns, double q) {
  if (ns.empty())
    return 0;
  const auto k = static_cast<size_t>(q * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<long>(k), ns.end());
  return ns[k] / 1e3;
}

double span_s_of(const std::vector<replay::trace_record>& trace) {
  return trace.empty()
             ? 0
             : static_cast<double>(trace.back().timestamp_ms - trace.front().timestamp_ms) / 1e3;
}

class scale_experiment final : public experiment {
 public:
  std::string_view name() const override { return "scale"; }
  std::string_view description() const override {
    return "16, 64, 256 nodes with the arrival rate scaled alike: simulation wall time, conductor "
           "decision latency, TTFT";
  }
  std::string_view figure() const override { return "beyond the paper"; }
  size_t planned_runs(const std::vector<replay::trace_record>&) const override {
    return node_counts.size();
  }

  caf::expected<result> run(context& ctx) const override {
    const auto& base = ctx.paper_cluster();
    result out;
    json points = json::array(), walls = json::array();
    table t;
    t.caption = "The paper cluster's setting at more nodes, the trace's rate scaled alike";
    t.header = {"nodes",
                "requests",
                "mean TTFT",
                "p90 TTFT",
                "effective",
                "wall time",
                "decisions: p50 / p99 (wall)",
                "other messages: p50 (wall)"};
    for (uint32_t n : node_counts) {
      auto row = run_nodes(ctx, base, n);
      if (!row)
        return std::move(row.error());
      points.push_back(row->data);
      walls.push_back(row->wall);
      t.rows.push_back(row->cells);
    }
    out.data["nodes_per_trace_copy"] = nodes_per_copy;
    out.data["points"] = points;
    out.wall["points"] = walls;
    out.tables.push_back(std::move(t));
    out.notes = notes();
    return out;
  }

 private:
  struct row {
    json data, wall;
    std::vector<std::string> cells;
  };

  static caf::expected<row> run_nodes(context& ctx, const cluster_config& base, uint32_t n) {
    const uint32_t copies = n / nodes_per_copy;
    auto trace = sim::tile_trace(ctx.trace(), copies, span_s_of(ctx.trace()));
    decision_timer timer;
    sim::simulate_options opt;
    opt.watch = [&](const sim::sim_system& sim, const sim::delivered_message& m,
                    const envelope* payload) { timer.on_message(sim, m, payload); };
    const auto started = std::chrono::steady_clock::now();
    auto s = ctx.simulate(fmt::format("{} nodes, {} copies of the trace", n, copies),
                          with_split(base, n, n / 2), std::move(trace), opt);
    if (!s)
      return std::move(s.error());
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto& r = s->report;
    row out;
    out.data = {{"nodes", n},
                {"prefill_nodes", n / 2},
                {"trace_copies", copies},
                {"messages", r.messages},
                {"summary", run_summary(r)}};
    const double p50 = quantile_us(timer.decisions_ns(), 0.5);
    const double p99 = quantile_us(timer.decisions_ns(), 0.99);
    const double other = quantile_us(timer.others_ns(), 0.5);
    out.wall = {{"nodes", n},
                {"wall_s", rounded(wall_s, 2)},
                {"decisions", timer.decisions_ns().size()},
                {"decision_us_p50", rounded(p50, 2)},
                {"decision_us_p99", rounded(p99, 2)},
                {"other_message_us_p50", rounded(other, 2)}};
    out.cells = {fmt::format("{}", n),
                 fmt::format("{}", r.requests),
                 fmt::format("{:.3f} s", mean_ttft_ms(r) / 1000),
                 fmt::format("{:.3f} s", r.summary.ttft_ms.p90 / 1000),
                 fmt::format("{} ({})", effective_at(r, r.slo.tbt_ms.front()),
                             percent(r.requests == 0 ? 0.0
                                                     : static_cast<double>(
                                                           effective_at(r, r.slo.tbt_ms.front())) /
                                                           static_cast<double>(r.requests))),
                 fmt::format("{:.1f} s", wall_s),
                 fmt::format("{:.1f} / {:.1f} us", p50, p99),
                 fmt::format("{:.1f} us", other)};
    return out;
  }

  static std::vector<std::string> notes() {
    return {"No paper figure: the paper ran 16 nodes. Each 16 nodes get one copy of the trace (its "
            "hash ids offset so that copies share nothing), the copies one after another and "
            "compressed into the trace's own span, so the arrival rate per node stays the trace's "
            "while each copy's requests come closer together in time.",
            "Wall-clock figures (wall time, decision latency) come from this machine and vary from "
            "run to run; they are in NAME.wall.json and this table, never in NAME.json. A "
            "decision's latency is the wall time from the delivery of a ScheduleRequest to the "
            "conductor to the next delivery: the conductor's handler plus the simulator's own cost "
            "of a delivery, which the median of all other deliveries shows beside it."};
  }
};

} // namespace

std::unique_ptr<experiment> make_scale_experiment() {
  return std::make_unique<scale_experiment>();
}

} // namespace crescent::experiment
