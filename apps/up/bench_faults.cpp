#include "apps/up/bench_faults.hpp"

#include "apps/up/netns.hpp"
#include "apps/up/up_command.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace crescent::cli {

namespace {

// Four node processes and the main process's node (the cluster needs one, whose memory the
// others reach it by); heartbeats every 100 ms and silence after 1 s, so that a 2 s pause or
// partition is seen as one (the default 5 s would only delay the requests). Every node has
// its own ports in its namespace.
constexpr const char* cluster_yaml = "nodes:\n"
                                     "  - {prefill: 1}\n"
                                     "  - {prefill: 1, address: \"127.0.0.1:7101\"}\n"
                                     "  - {prefill: 1, address: \"127.0.0.1:7102\"}\n"
                                     "  - {decode: 1, address: \"127.0.0.1:7103\"}\n"
                                     "  - {decode: 1, address: \"127.0.0.1:7104\"}\n"
                                     "join_timeout_ms: 30000\n"
                                     "heartbeat_interval_ms: 100\n"
                                     "conductor: {heartbeat_timeout_ms: 1000}\n";

struct scenario {
  const char* name;
  const char* fault; // one plan line; empty: no faults
};

// Faults start 3 s after the first request, while requests are still arriving.
constexpr scenario scenarios[] = {
    {"no faults", ""},
    {"kill -9 decode node 4", "{at_ms: 3000, kill: 4}"},
    {"kill -9 decode node 4, back 2 s later", "{at_ms: 3000, kill: 4, restart_after_ms: 2000}"},
    {"SIGSTOP prefill node 2, 2 s", "{at_ms: 3000, pause: 2, for_ms: 2000}"},
    {"partition decode node 3, 2 s", "{at_ms: 3000, partition: [3], for_ms: 2000}"},
    {"5% packet loss, nodes 2-3", "{at_ms: 0, drop: 0.05, node: 2, peer: 3}"},
};

std::string failures_of(const std::vector<replay::request_result>& results) {
  std::string out;
  for (const auto& [n, reason] : replay::failures_by_reason(results))
    out += fmt::format("{}{} x {}", out.empty() ? "" : "; ", n, reason);
  return out.empty() ? "-" : out;
}

} // namespace

int bench_faults(const bench_faults_options& opt) {
  if (auto why = up::netns_network::available()) {
    fmt::print(stderr, "crescent bench faults: partitions and packet loss need {}\n",
               describe(why));
    return 2;
  }
  namespace fs = std::filesystem;
  const std::string dir =
      opt.out_dir.empty()
          ? (fs::temp_directory_path() / ("crescent-bench-faults-" + std::to_string(getpid())))
                .string()
          : opt.out_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::ofstream{dir + "/cluster.yaml"} << cluster_yaml << "request_retries_max: " << opt.retries
                                       << "\n";
  fmt::print("crescent bench faults: {} requests of {} at x{}, 4 node processes in network "
             "namespaces (crescent up --netns), request_retries_max {}; runs in {}\n\n",
             opt.requests, opt.trace_path, opt.speedup, opt.retries, dir);
  struct row {
    std::string name, failures;
    replay::replay_summary summary;
    size_t violations = 0, faults = 0;
    int status = 0;
  };
  std::vector<row> rows;
  for (size_t i = 0; i < std::size(scenarios); ++i) {
    const auto& s = scenarios[i];
    up_options up;
    up.cluster_path = dir + "/cluster.yaml";
    up.run_dir = fmt::format("{}/run-{}", dir, i);
    up.netns = true;
    up.run.trace_path = opt.trace_path;
    up.run.requests = opt.requests;
    up.run.speedup = opt.speedup;
    up.run.progress = false;
    if (*s.fault != '\0') {
      up.faults_path = fmt::format("{}/plan-{}.yaml", dir, i);
      std::ofstream{up.faults_path} << "faults:\n  - " << s.fault << "\n";
    }
    fmt::print("--- {} ---\n", s.name);
    std::fflush(stdout);
    up_result found;
    row r;
    r.name = s.name;
    r.status = up_command(up, &found);
    if (r.status == 2)
      return 2; // it said why
    r.summary = replay::summarize(found.results);
    r.failures = failures_of(found.results);
    r.violations = found.violations.size();
    r.faults = found.faults_injected;
    rows.push_back(std::move(r));
    fmt::print("\n");
  }
  const double base_p99 = rows.front().summary.ttft_ms.p99;
  fmt::print("{:<38} {:>9} {:>8} {:>6} {:>7} {:>10} {:>10} {:>12}  {:<10}  {}\n", "run",
             "completed", "rejected", "failed", "retried", "TTFT p50", "TTFT p99", "added p99",
             "invariants", "failures by reason");
  bool all_held = true;
  for (const auto& r : rows) {
    all_held = all_held && r.violations == 0;
    fmt::print("{:<38} {:>9} {:>8} {:>6} {:>7} {:>7.1f} ms {:>7.1f} ms {:>+9.1f} ms  {:<10}  {}\n",
               r.name, r.summary.completed, r.summary.rejected, r.summary.failed, r.summary.retried,
               r.summary.ttft_ms.p50, r.summary.ttft_ms.p99, r.summary.ttft_ms.p99 - base_p99,
               r.violations == 0 ? "held" : fmt::format("{} broken", r.violations), r.failures);
  }
  fmt::print("\nadded p99 = the run's TTFT p99 minus the no-fault run's ({:.1f} ms), same "
             "invocation; every run must end every request and hold the invariants: {}\n",
             base_p99, all_held ? "held" : "NOT held");
  return all_held ? 0 : 1;
}

} // namespace crescent::cli
