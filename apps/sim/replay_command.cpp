#include "apps/sim/replay_command.hpp"

#include "actors/cluster/cluster.hpp"
#include "apps/replay/replay_driver.hpp"
#include "apps/replay/trace.hpp"
#include "apps/replay/workload.hpp"
#include "apps/sim/fault_injector.hpp"
#include "apps/sim/message_log.hpp"
#include "apps/sim/paper_cluster.hpp"
#include "apps/sim/sim_report.hpp"
#include "apps/sim/sim_system.hpp"
#include "messages/checked_read.hpp"
#include "messages/errors.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

namespace crescent::sim {

namespace {

int fail(const std::string& what) {
  fmt::print(stderr, "crescent replay: {}\n", what);
  return 2;
}

// How the report names the cluster it ran.
std::string cluster_name(const replay_options& opt) {
  if (!opt.coupled.empty())
    return "built-in coupled paper cluster (" + opt.coupled + ")";
  return opt.cluster_path.empty() ? "built-in paper cluster" : opt.cluster_path;
}

caf::expected<cluster_config> load_cluster(const replay_options& opt) {
  if (!opt.coupled.empty()) {
    bool chunked = false, caching = false;
    if (!opt.cluster_path.empty())
      return make_error(errc::invalid_argument,
                        "--coupled chooses a built-in cluster: it cannot go with --cluster");
    if (!parse_coupled_mode(opt.coupled, chunked, caching))
      return make_error(errc::invalid_argument,
                        "--coupled: expected prefill-first, chunked-prefill, prefix-caching or "
                        "chunked-prefix-caching, got '" +
                            opt.coupled + "'");
    return paper_coupled_cluster(chunked, caching);
  }
  if (opt.cluster_path.empty())
    return paper_cluster();
  return load_cluster_config(opt.cluster_path);
}

// The progress bar on stderr: virtual time over the trace's span, requests ended, wall time and
// an estimate of what is left.
class progress_bar {
 public:
  progress_bar(const sim_system& sim, double span_s, size_t requests,
               const std::vector<replay::request_result>& results)
      : sim_(sim), span_s_(span_s), requests_(requests), results_(results),
        tty_(isatty(fileno(stderr)) != 0), started_(std::chrono::steady_clock::now()) {}

  void update(bool last = false) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - shown_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::seconds(5)))
      return;
    shown_ = now;
    const double wall = std::chrono::duration<double>(now - started_).count();
    const double virtual_s = std::chrono::duration<double>(sim_.elapsed()).count();
    const double done = requests_ == 0 ? 1.0 : double(results_.size()) / double(requests_);
    const double eta = done > 0 ? wall * (1 - done) / done : 0;
    fmt::print(stderr,
               "{}[sim] virtual {:.1f} / {:.1f} s  ended {}/{}  wall {:.1f} s  ETA {:.1f} s{}",
               tty_ ? "\r" : "", virtual_s, span_s_, results_.size(), requests_, wall, eta,
               tty_ && !last ? "   " : "\n");
    std::fflush(stderr);
  }

 private:
  const sim_system& sim_;
  double span_s_;
  size_t requests_;
  const std::vector<replay::request_result>& results_;
  bool tty_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point shown_{};
};

std::vector<link_report> link_usage(const cluster& cl) {
  std::vector<link_report> out;
  const auto* links = cl.links();
  if (links == nullptr)
    return out;
  for (uint32_t n = 0; n < links->nodes(); ++n) {
    auto o = links->nic_out(n), i = links->nic_in(n), l = links->local(n);
    auto sr = links->ssd_read(n), sw = links->ssd_write(n);
    out.push_back({n, o.bytes, i.bytes, l.bytes, o.busy_ns, i.busy_ns, l.busy_ns, sr.bytes,
                   sw.bytes, sr.busy_ns, sw.busy_ns});
  }
  return out;
}

caf::error write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
  out.close();
  if (!out)
    return make_error(errc::io_error, "cannot write " + path);
  return caf::none;
}

// Plots through tools/plot_replay.py, with Debian's python3 and its python3-matplotlib (which
// tools/setup.sh installs; another python3 first on PATH may lack it).
caf::error write_plots(const std::string& report_path, const std::string& dir) {
  const std::string script = std::string{CRESCENT_TOOLS_DIR} + "/plot_replay.py";
  if (!std::filesystem::exists(script))
    return make_error(errc::not_found, "the plot script " + script + " is not there");
  for (const auto& path : {script, report_path, dir})
    if (path.find('\'') != std::string::npos)
      return make_error(errc::invalid_argument, "a path with a ' cannot be plotted: " + path);
  const char* python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = fmt::format("{} '{}' '{}' '{}'", python, script, report_path, dir);
  if (std::system(cmd.c_str()) != 0)
    return make_error(errc::io_error, "plotting failed: " + cmd);
  return caf::none;
}

struct replay_run {
  std::shared_ptr<std::vector<replay::request_result>> results =
      std::make_shared<std::vector<replay::request_result>>();
  double wall_s = 0;
  uint64_t messages = 0;
  uint64_t hash = 0;
  std::vector<link_report> links;
  uint64_t replicas_added = 0;
  std::string faults_log;
  std::vector<uint64_t> faults_taken;
};

// The store master's count of replicas made from pulls, asked after the replay (0 if it does
// not answer).
uint64_t replicas_added(sim_system& sim, const cluster& cl) {
  auto got = std::make_shared<std::optional<uint64_t>>();
  sim.system().spawn([got, master = cl.dir().store_master](caf::event_based_actor* self) {
    self->request(master, std::chrono::seconds(10), stats_atom::value)
        .then(
            [got](const typed_envelope<wire::StoreStats>& reply) {
              auto n = read_as<wire::StoreStats>(
                  reply, [](wire::StoreStats::Reader in) { return in.getReplicasAdded(); });
              *got = n ? *n : 0;
            },
            [got](caf::error&) { *got = 0; });
  });
  sim.run_until([&] { return got->has_value(); });
  return got->value_or(0);
}

// Brings the cluster up in simulated time, replays, and brings it down.
caf::expected<replay_run> run_replay(const simulate_options& opt, const cluster_config& cfg,
                                     std::vector<replay::trace_record> records, double span_s) {
  std::unique_ptr<delivery_policy> policy;
  if (opt.shuffle_seed)
    policy = std::make_unique<shuffled_delivery>(*opt.shuffle_seed);
  sim_system sim{policy.get()};
  auto cl = cluster::start(sim.system(), cfg);
  if (!cl)
    return make_error(errc::bad_config, "cluster bring-up: " + describe(cl.error()));
  label_actors(sim, (*cl)->dir());
  std::unique_ptr<message_log> log;
  if (!opt.messages_path.empty()) {
    auto opened = message_log::open(opt.messages_path);
    if (!opened)
      return std::move(opened.error());
    log = std::move(*opened);
    sim.set_tap([&](const delivered_message& m) { log->write(m, sim); });
  }
  if (opt.watch)
    sim.set_payload_tap(
        [&](const delivered_message& m, const envelope* payload) { opt.watch(sim, m, payload); });
  const auto w = workload_for(cfg, opt.speedup);
  std::vector<uint64_t> arrivals;
  for (const auto& r : records)
    for (int k = 0; k < (opt.kv_send_pairs ? 2 : 1); ++k)
      arrivals.push_back(replay::arrival_ns_of(r, w));
  auto shared_records = std::make_shared<std::vector<replay::trace_record>>(std::move(records));
  replay_run out;
  const size_t n = arrivals.size();
  progress_bar bar{sim, span_s, n, *out.results};
  if (opt.progress)
    sim.set_progress([&] { bar.update(); }, 4096);
  auto driver = replay::spawn_replay_driver(
      sim.system(), **cl, std::move(arrivals),
      [shared_records, w, pairs = opt.kv_send_pairs](size_t i) {
        return pairs ? replay::kv_send_pair_member(*shared_records, i, w)
                     : replay::synthesize((*shared_records)[i], i, w);
      },
      out.results,
      {.sequential = opt.sequential, .on_spawn = [&sim](const request_actor& r, uint64_t id) {
         // By its request's id, not its actor's: a report, a violation and a trace line then
         // name it by one number.
         sim.label(caf::actor_cast<caf::actor_addr>(r), fmt::format("request/{}", id));
       }});
  sim.label(caf::actor_cast<caf::actor_addr>(driver), "replay_driver");
  std::unique_ptr<fault_injector> faults;
  if (!opt.faults.faults.empty()) {
    faults =
        std::make_unique<fault_injector>(sim, **cl, &(*cl)->transfer(), opt.faults, opt.fault_seed);
    sim.set_filter(faults.get());
  }
  const auto started = std::chrono::steady_clock::now();
  caf::anon_send(driver, run_atom::value);
  const bool ended = sim.run_until([&] { return out.results->size() == n; });
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (opt.progress)
    bar.update(true);
  out.messages = sim.delivered();
  out.hash = sim.stream_hash();
  out.links = link_usage(**cl);
  sim.set_tap(nullptr); // the stream (and its hash) ends with the replay, not the shutdown
  sim.set_payload_tap(nullptr);
  sim.set_filter(nullptr); // the faults end with the replay too
  if (faults) {
    out.faults_log = faults->format_log();
    out.faults_taken = faults->taken();
    faults.reset(); // and its transfer faults
  }
  out.replicas_added = replicas_added(sim, **cl);
  if (ended && opt.after)
    opt.after(sim, **cl);
  (*cl)->stop();
  sim.run_ready();
  if (log)
    if (auto err = log->close())
      return err;
  if (!ended)
    return make_error(errc::internal, fmt::format("the simulation ran dry with {} of {} requests "
                                                  "ended",
                                                  out.results->size(), n));
  return out;
}

double span_of(const std::vector<replay::trace_record>& records,
               const replay::workload_options& w) {
  if (records.empty())
    return 0;
  return static_cast<double>(replay::arrival_ns_of(records.back(), w) -
                             replay::arrival_ns_of(records.front(), w)) /
         1e9;
}

} // namespace

replay::workload_options workload_for(const cluster_config& cfg, double speedup) {
  replay::workload_options w;
  w.block_tokens = tokens_per_trace_block(cfg);
  w.vocab = cfg.model.vocab;
  w.speedup = speedup;
  return w;
}

caf::expected<simulation> simulate(cluster_config cfg, std::vector<replay::trace_record> records,
                                   const simulate_options& opt) {
  if (!(opt.speedup > 0))
    return make_error(errc::invalid_argument, "the speedup must be positive");
  if (cfg.engine.kind == gpu::engine_kind::cuda)
    return make_error(errc::bad_config,
                      "engine.kind: cuda computes on a GPU in real time; simulated time runs the "
                      "modeled engine, or the reference engine with timing: modeled");
  if (cfg.engine.kind == gpu::engine_kind::reference &&
      cfg.engine.timing == gpu::timing_mode::measured)
    return make_error(errc::bad_config,
                      "engine.timing: measured reads the wall clock, which simulated time never "
                      "does: the reference engine needs timing: modeled here (or the modeled "
                      "engine, engine.kind: modeled)");
  cfg.simulated_time = true;
  const double span_s = span_of(records, workload_for(cfg, opt.speedup));
  auto run = run_replay(opt, cfg, std::move(records), span_s);
  if (!run)
    return std::move(run.error());
  simulation out;
  // The cluster's own SLOs, beside the paper's TBT thresholds.
  out.report.slo.ttft_ms = cfg.conductor.slo_ttft_ms;
  auto& tbt = out.report.slo.tbt_ms;
  if (std::find(tbt.begin(), tbt.end(), double(cfg.conductor.slo_tbt_ms)) == tbt.end()) {
    tbt.push_back(cfg.conductor.slo_tbt_ms);
    std::sort(tbt.begin(), tbt.end());
  }
  out.report.speedup = opt.speedup;
  out.report.coupled = is_coupled(cfg);
  for (uint32_t n = 0; n < cfg.nodes.size(); ++n)
    out.report.ssd = out.report.ssd || ssd_bytes_of(cfg, n) != 0;
  out.report.shuffle_seed = opt.shuffle_seed;
  out.report.messages = run->messages;
  out.report.message_hash = run->hash;
  out.report.links = std::move(run->links);
  out.report.replicas_added = run->replicas_added;
  measure(out.report, std::move(*run->results));
  out.wall = {run->wall_s, peak_rss_bytes()};
  out.faults_log = std::move(run->faults_log);
  out.faults_taken = std::move(run->faults_taken);
  return out;
}

int replay_command(const replay_options& opt) {
  spdlog::set_level(spdlog::level::err);
  auto cfg = load_cluster(opt);
  if (!cfg)
    return fail(describe(cfg.error()));
  if (opt.print_cluster) {
    fmt::print("# {}\n{}",
               opt.cluster_path.empty()
                   ? "The " + cluster_name(opt) +
                         " of crescent replay --sim (apps/sim/paper_cluster.hpp)"
                   : "From " + opt.cluster_path,
               format_cluster_config(*cfg));
    return 0;
  }
  if (!opt.sim)
    return fail("crescent replay runs in simulated time only: add --sim (crescent run replays "
                "in real time)");
  if (opt.trace_path.empty())
    return fail("a trace is needed: crescent replay TRACE --sim");
  cfg->access_key_seed = opt.seed;
  up::fault_plan plan;
  if (!opt.faults_path.empty()) {
    auto loaded = up::load_fault_plan(opt.faults_path);
    if (!loaded)
      return fail(describe(loaded.error()));
    if (auto err = up::check_sim_fault_plan(*loaded, *cfg, opt.faults_path))
      return fail(describe(err));
    plan = std::move(*loaded);
  }
  auto records = replay::read_trace(opt.trace_path, opt.requests);
  if (!records)
    return fail(describe(records.error()));
  const auto w = workload_for(*cfg, opt.speedup);
  fmt::print("crescent replay --sim: {} requests from {} on the {} ({} nodes); arrivals over "
             "{:.1f} s\n",
             records->size(), opt.trace_path, cluster_name(opt), cfg->nodes.size(),
             span_of(*records, w));
  std::fflush(stdout);
  simulate_options sopt;
  sopt.speedup = opt.speedup;
  sopt.shuffle_seed = opt.shuffle_seed;
  sopt.messages_path = opt.messages_path;
  sopt.sequential = opt.sequential;
  sopt.progress = opt.progress;
  sopt.faults = std::move(plan);
  sopt.fault_seed = opt.seed;
  auto sim = simulate(*cfg, std::move(*records), sopt);
  if (!sim)
    return fail(describe(sim.error()));
  auto& report = sim->report;
  report.trace = opt.trace_path;
  report.cluster = cluster_name(opt);
  report.seed = opt.seed;
  fmt::print("{}", format_text(report, sim->wall));
  if (!opt.faults_path.empty())
    fmt::print("faults        from {}:\n{}", opt.faults_path, sim->faults_log);
  std::string report_path = opt.report_path;
  if (report_path.empty() && !opt.plots_dir.empty())
    report_path = (std::filesystem::path{opt.plots_dir} / "replay.json").string();
  if (!opt.plots_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt.plots_dir, ec);
    if (ec)
      return fail("cannot create " + opt.plots_dir + ": " + ec.message());
  }
  if (!report_path.empty())
    if (auto err = write_file(report_path, format_json(report)))
      return fail(describe(err));
  if (!opt.plots_dir.empty())
    if (auto err = write_plots(report_path, opt.plots_dir))
      return fail(describe(err));
  for (const auto& r : report.results)
    if (r.status == replay::outcome_status::failed && report.summary.failed <= 20)
      fmt::print(stderr, "request {} failed: {}\n", r.id, r.reason);
  return report.summary.failed == 0 ? 0 : 1;
}

} // namespace crescent::sim
