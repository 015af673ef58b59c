#include "apps/chaos/chaos_command.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/common/code_probe.hpp"
#include "apps/sim/replay_command.hpp"
#include "apps/sim/sim_system.hpp"
#include "apps/up/settled_audit.hpp"
#include "messages/checked_read.hpp"
#include "messages/errors.hpp"

#include <caf/event_based_actor.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace crescent::chaos {

namespace {

// After the last request ended: long enough for every timeout that releases something (control
// and pool requests 30 s, leases 5 s, heartbeats 5 s) to have run out.
constexpr auto settle_time = std::chrono::seconds(60);

// Asks `who` for its stats in simulated time; nothing if it does not answer (it is gone).
template <class Handle>
std::optional<reply_t<Handle, stats_atom>> ask_stats(sim::sim_system& sim, const Handle& who) {
  using reply = reply_t<Handle, stats_atom>;
  auto got = std::make_shared<std::optional<reply>>();
  auto done = std::make_shared<bool>(false);
  sim.system().spawn([=](caf::event_based_actor* self) {
    self->request(who, std::chrono::seconds(10), stats_atom::value)
        .then(
            [=](const reply& e) {
              *got = e;
              *done = true;
            },
            [=](caf::error&) { *done = true; });
  });
  sim.run_until([&] { return *done; });
  return *got;
}

// What a crash prints: the seed it happened in (set before each seed; async-signal-safe).
char crash_note[1024];
size_t crash_note_length = 0;

void on_crash(int sig) {
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, crash_note, crash_note_length);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void note_seed(const chaos_options& opt, uint64_t seed) {
  const auto text = fmt::format("\ncrescent chaos: crashed in seed {}; run it alone with:\n  {}\n",
                                seed, reproduce_command(opt, seed));
  crash_note_length = std::min(text.size(), sizeof(crash_note));
  std::memcpy(crash_note, text.data(), crash_note_length);
}

// The lines of a message trace that `keep` takes.
template <class Keep>
std::vector<std::string> trace_lines(const std::string& path, Keep keep) {
  std::ifstream in{path};
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (keep(line))
      out.push_back(std::move(line));
  return out;
}

// The first `first` and the last `last` of `lines`, indented, with a count of those between.
std::string ends_of(const std::vector<std::string>& lines, size_t first, size_t last) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == first && lines.size() > first + last) {
      if (first > 0)
        out += fmt::format("    ... {} lines ...\n", lines.size() - first - last);
      i = lines.size() - last;
    }
    out += "    " + lines[i] + "\n";
  }
  return out;
}

// Whether a trace line's sender or receiver (its second and third columns) is `actor`.
bool sent_or_received_by(const std::string& line, const std::string& actor) {
  const auto a = line.find('\t');
  const auto b = a == std::string::npos ? a : line.find('\t', a + 1);
  const auto c = b == std::string::npos ? b : line.find('\t', b + 1);
  return c != std::string::npos &&
         (line.compare(a + 1, b - a - 1, actor) == 0 || line.compare(b + 1, c - b - 1, actor) == 0);
}

} // namespace

cluster_config chaos_cluster() {
  cluster_config cfg; // 2 prefill nodes, 2 decode nodes, the reference engine
  // The reference engine's arithmetic is most of a run's time, and the invariants need the
  // actors' paths, not a wide model or long prompts: the embedded model's two layers at half
  // the width, and pages of 8 tokens (a trace block maps to one page: prompts half as long,
  // as many pages and messages a request; attention's cost falls by about four).
  cfg.model.d_model = 32;
  cfg.model.heads = 2;
  cfg.model.kv_heads = 1;
  cfg.model.ffn = 64;
  cfg.model.block_tokens = 8;
  // As many pool blocks and decode pages as the embedded cluster has, at half a page's bytes.
  for (auto& n : cfg.nodes)
    n.pool_bytes = 4ull << 20;
  cfg.decode.kv_bytes = 8ull << 20;
  // Two replicas of every block: an acknowledged block must then survive one node's loss, which
  // the audit checks after every seed.
  cfg.pool.replicas = 2;
  // No fsync per commit: a seed never restarts the store master from its disk (no fault kind
  // does), so a sync buys nothing here and costs wall time (the paper cluster does the same).
  cfg.store.sync_commits = false;
  cfg.engine.timing = gpu::timing_mode::modeled;
  return cfg;
}

caf::expected<campaign> prepare_campaign(const chaos_options& opt) {
  campaign c;
  c.options = opt;
  if (opt.seeds == 0)
    return make_error(errc::invalid_argument, "--seeds: at least one");
  if (!opt.cluster_path.empty()) {
    auto cfg = load_cluster_config(opt.cluster_path);
    if (!cfg)
      return std::move(cfg.error());
    c.cfg = std::move(*cfg);
  } else {
    c.cfg = chaos_cluster();
  }
  if (c.cfg.engine.kind != gpu::engine_kind::reference)
    return make_error(errc::bad_config,
                      "crescent chaos checks decoded tokens against the reference engine: the "
                      "cluster needs engine.kind: reference");
  c.cfg.engine.timing = gpu::timing_mode::modeled; // simulated time reads no wall clock
  if (!opt.budget_path.empty()) {
    auto b = load_fault_budget(opt.budget_path);
    if (!b)
      return std::move(b.error());
    c.budget = std::move(*b);
  }
  auto records = replay::read_trace(opt.trace_path, opt.requests);
  if (!records)
    return std::move(records.error());
  c.records = std::move(*records);
  const auto w = sim::workload_for(c.cfg, opt.speedup);
  for (size_t i = 0; i < c.records.size(); ++i)
    c.requests.push_back(replay::synthesize(c.records[i], i, w));
  if (!c.records.empty())
    c.span_ms =
        (replay::arrival_ns_of(c.records.back(), w) - replay::arrival_ns_of(c.records.front(), w)) /
        1'000'000;
  return c;
}

void settle_and_audit(sim::sim_system& sim, cluster& cl, const up::fault_plan& plan,
                      std::vector<std::string>& violations) {
  const auto until = sim.elapsed() + settle_time;
  sim.run_until([&] { return sim.elapsed() >= until; });
  std::set<uint32_t> killed; // and not started again: a node that was counts as live
  for (const auto& f : plan.faults)
    if (f.kind == up::fault_kind::kill && f.restart_after_ms == 0)
      killed.insert(f.node);
  violations = up::audit_once(
      cl, killed, up::stats_asker::of([&](const auto& who) { return ask_stats(sim, who); }));
}

seed_result run_seed(campaign& c, uint64_t seed, const std::string& messages_path) {
  return run_plan(c, draw_fault_plan(c.budget, c.cfg, seed, c.span_ms), seed, messages_path);
}

seed_result run_plan(campaign& c, const up::fault_plan& plan, uint64_t seed,
                     const std::string& messages_path) {
  seed_result r;
  r.seed = seed;
  r.plan = plan;
  const auto probes_before = probe_hits();
  sim::simulate_options opt;
  opt.speedup = c.options.speedup;
  opt.faults = r.plan;
  opt.fault_seed = seed;
  opt.messages_path = messages_path;
  std::vector<std::string> audit;
  opt.after = [&](sim::sim_system& sim, cluster& cl) { settle_and_audit(sim, cl, r.plan, audit); };
  auto s = sim::simulate(c.cfg, c.records, opt);
  if (!s) {
    r.violations.push_back("the run did not end: " + describe(s.error()));
    return r;
  }
  r.message_hash = s->report.message_hash;
  r.messages = s->report.messages;
  r.completed = s->report.summary.completed;
  r.rejected = s->report.summary.rejected;
  r.failed = s->report.summary.failed;
  r.faults_log = std::move(s->faults_log);
  r.faults_taken = std::move(s->faults_taken);
  r.results = s->report.results;
  auto inv = up::check_invariants(c.cfg, c.requests, s->report.results, &c.reference);
  r.violations = std::move(inv.violations);
  r.requests_violated = std::move(inv.requests_violated);
  r.violations.insert(r.violations.end(), audit.begin(), audit.end());
  const auto probes_after = probe_hits();
  for (size_t i = 0; i < probes_after.size(); ++i)
    r.probes.push_back(probes_after[i] > probes_before[i]);
  return r;
}

std::string reproduce_command(const chaos_options& opt, uint64_t seed) {
  std::string cmd =
      fmt::format("crescent chaos --seeds 1 --first {} --requests {}", seed, opt.requests);
  if (opt.speedup != 4.0)
    cmd += fmt::format(" --speedup {}", opt.speedup);
  if (!opt.budget_path.empty())
    cmd += " --faults " + opt.budget_path;
  if (!opt.cluster_path.empty())
    cmd += " --cluster " + opt.cluster_path;
  cmd += " --trace " + opt.trace_path + " --verbose";
  return cmd;
}

namespace {

void report_failure(campaign& c, const seed_result& r) {
  const auto& opt = c.options;
  fmt::print("seed {}: VIOLATED ({} of {} requests completed, {} rejected, {} failed)\n", r.seed,
             r.completed, c.requests.size(), r.rejected, r.failed);
  fmt::print("  plan (at: ms into the run; the message trace counts ns from the same start):\n");
  for (const auto& f : r.plan.faults)
    fmt::print("    at {:>6}: {}\n", f.at_ms, up::describe(f));
  for (const auto& v : r.violations)
    fmt::print("  violation: {}\n", v);
  fmt::print("  run it alone: {}\n", reproduce_command(opt, r.seed));
  // The same seed again, with its message trace written out: it must be the same run.
  const std::string path = fmt::format("{}/chaos-seed-{}.messages", opt.out_dir, r.seed);
  auto again = run_seed(c, r.seed, path);
  if (again.message_hash != r.message_hash)
    fmt::print("  NOT DETERMINISTIC: the second run's message hash is {:016x}, the first's "
               "{:016x}\n",
               again.message_hash, r.message_hash);
  fmt::print("  message trace: {} (time ns, sender, receiver, type, bytes); its end:\n{}", path,
             ends_of(trace_lines(path, [](const std::string&) { return true; }), 0, 30));
  // What a request named by a violation sent and received: where its story went wrong.
  for (const auto id : r.requests_violated)
    fmt::print("  messages of request {} (request/{} in the trace):\n{}", id, id,
               ends_of(trace_lines(path,
                                   [actor = fmt::format("request/{}", id)](const std::string& l) {
                                     return sent_or_received_by(l, actor);
                                   }),
                       20, 20));
}

} // namespace

namespace {

struct tally {
  uint64_t seeds = 0, faults = 0, failing = 0;
  std::vector<uint64_t> probe_seeds = std::vector<uint64_t>(std::size(code_probes)); // reaching
  void add(const tally& t) {
    seeds += t.seeds;
    faults += t.faults;
    failing += t.failing;
    for (size_t i = 0; i < probe_seeds.size(); ++i)
      probe_seeds[i] += t.probe_seeds[i];
  }
};

// The rare paths a campaign reached, probe by probe; those it did not are named as such.
void print_probes(const tally& t) {
  const auto reached =
      std::count_if(t.probe_seeds.begin(), t.probe_seeds.end(), [](uint64_t n) { return n > 0; });
  fmt::print("probes        {} of {} rare paths reached (actors/common/code_probe.hpp), in so "
             "many seeds:\n",
             reached, t.probe_seeds.size());
  for (size_t i = 0; i < t.probe_seeds.size(); ++i)
    fmt::print("  {:<32} {:>6}{}\n", code_probes[i].name, t.probe_seeds[i],
               t.probe_seeds[i] == 0 ? "  never" : "");
}

// Seeds first, first + stride, ... below end, each reported as it ends.
tally run_seeds(campaign& c, uint64_t first, uint64_t end, uint64_t stride) {
  const auto& opt = c.options;
  tally t;
  for (uint64_t seed = first; seed < end; seed += stride) {
    note_seed(opt, seed);
    auto r = run_seed(c, seed, "");
    ++t.seeds;
    t.faults += r.plan.faults.size();
    for (size_t i = 0; i < r.probes.size() && i < t.probe_seeds.size(); ++i)
      t.probe_seeds[i] += r.probes[i] ? 1 : 0;
    if (opt.verbose) {
      fmt::print("seed {}: {} faults, {} completed, {} rejected, {} failed, {} messages, hash "
                 "{:016x}: {}\n",
                 seed, r.plan.faults.size(), r.completed, r.rejected, r.failed, r.messages,
                 r.message_hash, r.held() ? "invariants held" : "VIOLATED");
      for (const auto& f : r.plan.faults)
        fmt::print("    {}\n", up::describe(f));
      if (opt.faults_log)
        fmt::print("{}", r.faults_log);
      for (const auto& [n, reason] : failures_by_reason(r.results))
        fmt::print("    failed: {} x {}\n", n, reason);
    }
    if (!r.held()) {
      ++t.failing;
      report_failure(c, r);
    }
    std::fflush(stdout);
  }
  return t;
}

constexpr const char* job_tally_tag = "#chaos-job ";

// A job's tally as its child printed it: seeds, faults, failing seeds, then the seeds that
// reached each code probe.
std::optional<tally> read_job_tally(const std::string& line) {
  std::istringstream in{line};
  tally t;
  if (!(in >> t.seeds >> t.faults >> t.failing))
    return std::nullopt;
  for (auto& n : t.probe_seeds)
    if (!(in >> n))
      return std::nullopt;
  return t;
}

// --jobs N: child k runs seeds first + k, first + k + N, ...; its report goes to a file of its
// own, which the parent prints in job order once all have ended. Processes, not threads: every
// seed's actor system stays alone in its process, as it is with one job.
tally run_in_children(campaign& c, std::vector<std::string>& crashed) {
  const auto& opt = c.options;
  const uint64_t end = opt.first + opt.seeds;
  struct child {
    pid_t pid;
    std::string path;
  };
  std::vector<child> children;
  for (uint32_t k = 0; k < opt.jobs && opt.first + k < end; ++k) {
    char path[] = "/tmp/crescent-chaos-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) {
      crashed.push_back(fmt::format("job {}: no temporary file: {}", k, std::strerror(errno)));
      continue;
    }
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::close(fd);
      auto t = run_seeds(c, opt.first + k, end, opt.jobs);
      fmt::print("{}{} {} {} {}\n", job_tally_tag, t.seeds, t.faults, t.failing,
                 fmt::join(t.probe_seeds, " "));
      std::fflush(stdout);
      ::_exit(0);
    }
    ::close(fd);
    if (pid < 0)
      crashed.push_back(fmt::format("job {}: fork failed: {}", k, std::strerror(errno)));
    else
      children.push_back({pid, path});
  }
  tally total;
  for (size_t k = 0; k < children.size(); ++k) {
    int status = 0;
    ::waitpid(children[k].pid, &status, 0);
    std::ifstream in{children[k].path};
    bool tallied = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(job_tally_tag, 0) != 0) {
        fmt::print("{}\n", line);
        continue;
      }
      if (auto t = read_job_tally(line.substr(std::strlen(job_tally_tag)))) {
        total.add(*t);
        tallied = true;
      }
    }
    ::unlink(children[k].path.c_str());
    if (!tallied)
      crashed.push_back(fmt::format("job {} ended before its last seed (status {})", k, status));
  }
  return total;
}

} // namespace

int chaos_command(const chaos_options& opt) {
  spdlog::set_level(spdlog::level::off); // faults make actors complain by design
  auto c = prepare_campaign(opt);
  if (!c) {
    fmt::print(stderr, "crescent chaos: {}\n", describe(c.error()));
    return 2;
  }
  fmt::print("crescent chaos: seeds {} to {}, {} requests each on {} nodes (reference engine, "
             "simulated time), arrivals over {:.1f} s, {} job{}\n",
             opt.first, opt.first + opt.seeds - 1, c->requests.size(), c->cfg.nodes.size(),
             double(c->span_ms) / 1e3, opt.jobs, opt.jobs == 1 ? "" : "s");
  std::fflush(stdout);
  std::signal(SIGSEGV, on_crash);
  std::signal(SIGABRT, on_crash);
  std::signal(SIGBUS, on_crash);
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> crashed;
  const tally t = opt.jobs <= 1 ? run_seeds(*c, opt.first, opt.first + opt.seeds, 1)
                                : run_in_children(*c, crashed);
  std::signal(SIGSEGV, SIG_DFL);
  std::signal(SIGABRT, SIG_DFL);
  std::signal(SIGBUS, SIG_DFL);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (const auto& x : crashed)
    fmt::print("chaos         {}\n", x);
  fmt::print("chaos         {} seeds, {} faults injected: {} seeds violated an invariant; {:.1f} "
             "s wall ({:.2f} s a seed)\n",
             t.seeds, t.faults, t.failing, wall, wall / double(std::max<uint64_t>(t.seeds, 1)));
  print_probes(t);
  return t.failing == 0 && crashed.empty() && t.seeds == opt.seeds ? 0 : 1;
}

} // namespace crescent::chaos
