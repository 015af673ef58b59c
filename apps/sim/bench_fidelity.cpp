#include "apps/sim/bench_fidelity.hpp"

#include "actors/cluster/profile_yaml.hpp"
#include "apps/profile/profile_command.hpp"
#include "apps/replay/real_time.hpp"
#include "apps/sim/replay_command.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>

#include <cmath>

namespace crescent::sim {

namespace {

int fail(const std::string& what) {
  fmt::print(stderr, "crescent bench fidelity: {}\n", what);
  return 2;
}

caf::expected<std::shared_ptr<const gpu::modeled_profile>>
profile_for(const bench_fidelity_options& opt, const cluster_config& cfg) {
  if (!opt.profile_path.empty())
    return load_profile(opt.profile_path);
  cli::profile_options popt;
  popt.warmup = opt.warmup;
  auto measured = cli::measure_profile(cfg, popt);
  if (!measured)
    return std::move(measured.error());
  fmt::print("profile: measured here, prefill fit error {:.1f}%, decode fit error {:.1f}%\n",
             100 * measured->profile->prefill_fit_error, 100 * measured->profile->decode_fit_error);
  return measured->profile;
}

// Percentiles over all requests of what `of` takes from each (none, one or several values, in
// ms).
template <class F>
replay::percentiles percentiles_ms(const std::vector<replay::request_result>& results, F of) {
  std::vector<double> values;
  for (const auto& r : results)
    of(r, values);
  return replay::percentiles_of(values);
}

double ms(int64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

// Every interval between two tokens of a request: where TBT (the mean of a request's longest
// tenth) comes from.
void token_intervals(const replay::request_result& r, std::vector<double>& out) {
  for (size_t i = 1; i < r.token_times_ns.size(); ++i)
    out.push_back(ms(r.token_times_ns[i] - r.token_times_ns[i - 1]));
}

// What a first token waits for besides its prefill's compute: queueing, loads, the hand-off,
// and in real time the actor system's own work.
void ttft_beyond_compute(const replay::request_result& r, std::vector<double>& out) {
  if (!r.token_times_ns.empty())
    out.push_back(
        ms(r.token_times_ns.front() - r.arrival_ns - static_cast<int64_t>(r.prefill_compute_ns)));
}

// The interval between a request's first token (from prefill) and its second (its decode
// instance's first step after the hand-off): the KV's arrival, the batch's join, one step.
void first_interval(const replay::request_result& r, std::vector<double>& out) {
  if (r.token_times_ns.size() >= 2)
    out.push_back(ms(r.token_times_ns[1] - r.token_times_ns[0]));
}

void prefill_compute(const replay::request_result& r, std::vector<double>& out) {
  out.push_back(ms(static_cast<int64_t>(r.prefill_compute_ns)));
}

double error_of(double simulated, double real) {
  return real == 0 ? 0 : (simulated - real) / real;
}

void print_row(const char* what, double real, double simulated, bool target) {
  const double e = error_of(simulated, real);
  fmt::print("{:<10} {:>10.3f} {:>10.3f} {:>+8.1f}%{}\n", what, real, simulated, 100 * e,
             target ? (std::fabs(e) <= 0.2 ? "   (target within 20%: met)"
                                           : "   (target within 20%: MISSED)")
                    : "");
}

} // namespace

int bench_fidelity(const bench_fidelity_options& opt) {
  auto records = replay::read_trace(opt.trace_path, opt.requests);
  if (!records)
    return fail(describe(records.error()));
  cluster_config real_cfg; // the embedded default cluster, as crescent run, or the file's
  if (!opt.config_path.empty()) {
    auto loaded = load_cluster_config(opt.config_path);
    if (!loaded)
      return fail(describe(loaded.error()));
    real_cfg = std::move(*loaded);
  }
  if (auto err = check_real_time(real_cfg))
    return fail(describe(err));
  auto profile = profile_for(opt, real_cfg);
  if (!profile)
    return fail(describe(profile.error()));
  replay::workload_options w{tokens_per_trace_block(real_cfg), real_cfg.model.vocab, 1.0,
                             opt.speedup};
  std::vector<replay::synthetic_request> requests;
  for (size_t i = 0; i < records->size(); ++i)
    requests.push_back(replay::synthesize((*records)[i], i, w));
  auto real = replay::replay_in_real_time(real_cfg, std::move(requests), nullptr);
  if (!real)
    return fail(describe(real.error()));
  cluster_config sim_cfg = real_cfg;
  sim_cfg.engine.kind = gpu::engine_kind::modeled;
  sim_cfg.engine.timing = gpu::timing_mode::modeled;
  sim_cfg.engine.profile = *profile;
  sim_cfg.engine.profile_name = (*profile)->name;
  simulate_options sopt;
  sopt.speedup = opt.speedup;
  auto sim = simulate(sim_cfg, *records, sopt);
  if (!sim)
    return fail(describe(sim.error()));
  const auto r = replay::summarize(real->results);
  const auto& s = sim->report.summary;
  fmt::print("crescent bench fidelity: the first {} requests of {}, arrivals {}x faster, on {}: "
             "real (reference engine, {} layers, d_model {}, {:.1f} s) against simulated "
             "(profile {})\n",
             records->size(), opt.trace_path, opt.speedup,
             opt.config_path.empty() ? "the embedded default cluster" : opt.config_path,
             real_cfg.model.layers, real_cfg.model.d_model, real->wall_s, (*profile)->name);
  fmt::print("{:<10} {:>10} {:>10} {:>9}\n", "ms", "real", "simulated", "error");
  print_row("TTFT p50", r.ttft_ms.p50, s.ttft_ms.p50, true);
  print_row("TTFT p90", r.ttft_ms.p90, s.ttft_ms.p90, false);
  print_row("TBT p50", r.tbt_ms.p50, s.tbt_ms.p50, true);
  print_row("TBT p90", r.tbt_ms.p90, s.tbt_ms.p90, false);
  const auto rc = percentiles_ms(real->results, prefill_compute);
  const auto sc = percentiles_ms(sim->report.results, prefill_compute);
  print_row("compute p50", rc.p50, sc.p50, false);
  const auto rb = percentiles_ms(real->results, ttft_beyond_compute);
  const auto sb = percentiles_ms(sim->report.results, ttft_beyond_compute);
  print_row("rest p50", rb.p50, sb.p50, false);
  print_row("rest p90", rb.p90, sb.p90, false);
  const auto ri = percentiles_ms(real->results, token_intervals);
  const auto si = percentiles_ms(sim->report.results, token_intervals);
  print_row("gap p50", ri.p50, si.p50, false);
  print_row("gap p90", ri.p90, si.p90, false);
  print_row("gap p99", ri.p99, si.p99, false);
  const auto rf = percentiles_ms(real->results, first_interval);
  const auto sf = percentiles_ms(sim->report.results, first_interval);
  print_row("first p50", rf.p50, sf.p50, false);
  print_row("first p90", rf.p90, sf.p90, false);
  fmt::print("completed  real {} of {}, simulated {} of {}\n", r.completed, records->size(),
             s.completed, records->size());
  const bool met = std::fabs(error_of(s.ttft_ms.p50, r.ttft_ms.p50)) <= 0.2 &&
                   std::fabs(error_of(s.tbt_ms.p50, r.tbt_ms.p50)) <= 0.2;
  return met ? 0 : 1;
}

} // namespace crescent::sim
