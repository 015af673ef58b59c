#include "apps/up/up_command.hpp"

#include "apps/up/fault_plan.hpp"
#include "apps/up/fault_runner.hpp"
#include "apps/up/invariants.hpp"
#include "apps/up/message_gate.hpp"
#include "apps/up/netns.hpp"
#include "apps/up/node_launch.hpp"
#include "apps/up/settled_audit.hpp"
#include "apps/up/transfer_faults.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

namespace crescent::cli {

namespace {

int fail(const std::string& what) {
  fmt::print(stderr, "crescent up: {}\n", what);
  return 2;
}

// The node processes' ids, for the signal watcher: on SIGINT or SIGTERM they are killed before
// this process exits, so that none is left behind.
struct process_registry {
  std::mutex mutex;
  std::vector<pid_t> pids;
  std::vector<uint32_t> netns_nodes; // whose namespaces to remove (--netns)
  bool netns = false;
};

process_registry& registry() {
  static process_registry r;
  return r;
}

// Waits for SIGINT or SIGTERM on a thread of its own (every other thread has them blocked):
// kills the node processes, reaps them and exits with 128 + the signal.
void watch_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0)
      return;
    std::lock_guard<std::mutex> guard{registry().mutex};
    for (auto pid : registry().pids) {
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
    }
    for (auto pid : registry().pids)
      waitpid(pid, nullptr, 0);
    if (registry().netns)
      up::netns_network::remove_all(getpid(), registry().netns_nodes);
    fmt::print(stderr, "\ncrescent up: interrupted (signal {}); every node process is gone\n", sig);
    std::_Exit(128 + sig);
  }).detach();
}

caf::expected<std::string> make_run_dir(const std::string& asked) {
  namespace fs = std::filesystem;
  const std::string dir =
      asked.empty()
          ? "crescent-up-" + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count())
          : asked;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    return make_error(errc::bad_config, "--run-dir " + dir + " exists and is not empty");
  if (!fs::create_directories(dir, ec) && ec)
    return make_error(errc::io_error, "--run-dir " + dir + ": " + ec.message());
  return fs::absolute(dir, ec).string();
}

// The cluster file, the plan, the run directory: everything checked before a process starts.
struct prepared {
  cluster_config cfg;
  up::fault_plan plan;
  std::string run_dir;
  std::vector<replay::synthetic_request> requests;
};

caf::expected<prepared> prepare(const up_options& opt) {
  prepared p;
  auto cfg = load_cluster_config(opt.cluster_path);
  if (!cfg)
    return std::move(cfg.error());
  if (auto err = check_real_time(*cfg))
    return make_error(errc::bad_config, opt.cluster_path + ": " + describe(err));
  p.cfg = std::move(*cfg);
  if (auto err = apply_kv_send(opt.run.kv_send, p.cfg))
    return err;
  if (!opt.faults_path.empty()) {
    auto plan = up::load_fault_plan(opt.faults_path);
    if (!plan)
      return std::move(plan.error());
    if (auto err = up::check_fault_plan(*plan, p.cfg, opt.faults_path, opt.netns))
      return err;
    p.plan = std::move(*plan);
  }
  if (opt.netns)
    if (auto err = up::netns_network::available())
      return err;
  auto requests = requests_for(opt.run, p.cfg);
  if (!requests)
    return std::move(requests.error());
  p.requests = std::move(*requests);
  auto dir = make_run_dir(opt.run_dir);
  if (!dir)
    return std::move(dir.error());
  p.run_dir = std::move(*dir);
  // The block metadata lives in the run directory: nothing is left in /tmp, even on SIGINT.
  if (p.cfg.store.db_path.empty())
    p.cfg.store.db_path = p.run_dir + "/metadata";
  return p;
}

// --netns: the network made, and the cluster file the processes read, with each node's address
// in its namespace, the main process's on the bridge, and no shared memory between processes
// (a mapping would carry KV bytes past the network the faults act on).
caf::expected<std::unique_ptr<up::netns_network>>
make_network(prepared& p, std::string& config_path, uint32_t link_mbit) {
  std::vector<uint32_t> hosted;
  for (uint32_t n = 0; n < p.cfg.nodes.size(); ++n)
    if (p.cfg.nodes[n].hosted_elsewhere())
      hosted.push_back(n);
  {
    std::lock_guard<std::mutex> guard{registry().mutex};
    registry().netns_nodes = hosted;
    registry().netns = true;
  }
  auto net = up::netns_network::create(hosted, p.run_dir, link_mbit);
  if (!net)
    return std::move(net.error());
  for (auto n : hosted) {
    auto address = parse_node_address(p.cfg.nodes[n].address);
    if (!address)
      return std::move(address.error());
    p.cfg.nodes[n].address = (*net)->host_of(n) + ":" + std::to_string(address->port);
  }
  p.cfg.transfer.bind_host = (*net)->main_host();
  p.cfg.transfer.shm = false;
  config_path = p.run_dir + "/cluster.yaml";
  std::ofstream{config_path} << format_cluster_config(p.cfg);
  return net;
}

// Message faults run in a gate per node process (message_gate.hpp; with --netns, all but drops,
// which are of packets there): this process reaches each node through its gate, on its own
// loopback, while the nodes, which read the cluster file, listen where they did (in their
// namespaces with --netns, which this process reaches over the bridge).
caf::expected<std::vector<std::unique_ptr<up::message_gate>>> start_gates(prepared& p,
                                                                          uint64_t seed) {
  std::vector<std::unique_ptr<up::message_gate>> out;
  for (uint32_t n = 0; n < p.cfg.nodes.size(); ++n) {
    if (!p.cfg.nodes[n].hosted_elsewhere())
      continue;
    auto address = parse_node_address(p.cfg.nodes[n].address);
    if (!address)
      return std::move(address.error());
    auto gate = up::message_gate::start(n, address->host, address->port, p.plan.faults, seed);
    if (!gate)
      return std::move(gate.error());
    p.cfg.nodes[n].address = fmt::format("127.0.0.1:{}", (*gate)->port());
    out.push_back(std::move(*gate));
  }
  return out;
}

// Where each process is and who each actor of the cluster is, for the gates: a node's actors
// run where its handle's CAF node id says (its own process, or this one).
std::shared_ptr<const up::gate_directory> gate_directory_of(const directory& dir,
                                                            const cluster_config& cfg) {
  auto out = std::make_shared<up::gate_directory>();
  out->add_place(dir.conductor.node(), up::main_place);
  for (uint32_t n = 0; n < cfg.nodes.size() && n < dir.node_agents.size(); ++n)
    if (cfg.nodes[n].hosted_elsewhere() && dir.node_agents[n])
      out->add_place(dir.node_agents[n].node(), static_cast<int32_t>(n));
  auto place_of = [&](const caf::node_id& id) {
    for (uint32_t n = 0; n < dir.node_agents.size(); ++n)
      if (cfg.nodes[n].hosted_elsewhere() && dir.node_agents[n] && dir.node_agents[n].node() == id)
        return static_cast<int32_t>(n);
    return up::main_place;
  };
  auto add = [&](const auto& handles, const char* role) {
    for (const auto& h : handles)
      if (h)
        out->roles[{place_of(h.node()), h.id()}] = role;
  };
  add(std::vector{dir.conductor}, "conductor");
  add(std::vector{dir.store_master}, "store_master");
  add(dir.block_owners, "block_owner");
  add(dir.node_agents, "node_agent");
  add(dir.prefill, "prefill");
  add(dir.decode, "decode");
  add(dir.coupled, "coupled");
  return out;
}

// Node processes that ended during the run though no fault killed them: one cut off past
// connection_timeout_ms ends itself (docs/faults.md); a crash reads the same, its log says which.
std::string format_ended_early(const std::vector<uint32_t>& nodes, const std::string& run_dir) {
  std::string out;
  for (auto n : nodes)
    out += fmt::format("lost          node {}: its process ended during the run, not killed by "
                       "the plan ({}/node-{}.log)\n",
                       n, run_dir, n);
  return out;
}

std::string format_gate_counts(const std::vector<std::unique_ptr<up::message_gate>>& gates) {
  up::gate_counts sum;
  for (const auto& g : gates) {
    const auto c = g->counts();
    sum.frames += c.frames;
    sum.dropped += c.dropped;
    sum.delayed += c.delayed;
    sum.duplicated += c.duplicated;
    sum.reordered += c.reordered;
    sum.overflow += c.overflow;
  }
  return fmt::format("messages      {} through the message gates: {} dropped, {} delayed, {} "
                     "duplicated, {} reordered by the plan{}\n",
                     sum.frames, sum.dropped, sum.delayed, sum.duplicated, sum.reordered,
                     sum.overflow == 0
                         ? std::string{}
                         : fmt::format(" ({} passed at once: too many held)", sum.overflow));
}

// Failed requests counted by reason, most frequent first.
std::string format_failures(const std::vector<replay::request_result>& results) {
  std::string out;
  for (const auto& [n, reason] : replay::failures_by_reason(results))
    out += fmt::format("failed        {} x {}\n", n, reason);
  return out;
}

// One line of JSON per request: what ended it, where it ran, when.
void write_requests(const std::string& run_dir,
                    const std::vector<replay::request_result>& results) {
  std::ofstream out{run_dir + "/requests.jsonl"};
  int64_t first_ns = INT64_MAX;
  for (const auto& r : results)
    first_ns = std::min(first_ns, r.arrival_ns);
  for (const auto& r : results) {
    nlohmann::json j;
    j["id"] = r.id;
    j["status"] = r.status == replay::outcome_status::completed  ? "completed"
                  : r.status == replay::outcome_status::rejected ? "rejected"
                                                                 : "failed";
    j["reason"] = r.reason;
    j["arrival_ms"] = static_cast<double>(r.arrival_ns - first_ns) / 1e6;
    j["prefill_instance"] = r.prefill_instance;
    j["decode_instance"] = r.decode_instance;
    j["tokens"] = r.tokens.size();
    out << j.dump() << "\n";
  }
}

// The KV slice attempts the transfer faults took: this process's, and each node's from the line it
// printed as it exited (a killed node printed none: its count is missing, said so).
std::string format_slices_taken(const std::vector<std::string>& node_logs) {
  auto taken = up::transfer_faults_taken_here();
  size_t silent = 0;
  for (const auto& path : node_logs) {
    std::ifstream in{path};
    std::string line;
    bool found = false;
    while (std::getline(in, line)) {
      unsigned long long f = 0, c = 0, d = 0;
      const auto at = line.find("transfer faults: ");
      if (line.rfind("crescent-node ", 0) == 0 && at != std::string::npos &&
          std::sscanf(line.c_str() + at,
                      "transfer faults: %llu slice attempts failed, %llu corrupted, %llu delayed",
                      &f, &c, &d) == 3) {
        taken.failed += f;
        taken.corrupted += c;
        taken.delayed += d;
        found = true;
      }
    }
    silent += found ? 0 : 1;
  }
  return fmt::format(
      "transfer      {} KV slice attempts failed, {} corrupted, {} delayed by the plan{}\n",
      taken.failed, taken.corrupted, taken.delayed,
      silent == 0 ? std::string{}
                  : fmt::format(" ({} node processes did not say: killed or ended early)", silent));
}

void write_processes(const std::string& run_dir, const std::vector<up::node_process>& nodes) {
  std::ofstream out{run_dir + "/processes.txt"};
  out << "main " << getpid() << "\n";
  for (const auto& x : nodes)
    out << "node " << x.node << " " << x.process.pid() << "\n";
}

// --kv-send ab: the same requests sent after prefill and streamed, alternating (after, stream,
// after, stream) so that a machine that slows or warms up weighs on both alike, each round a
// bring-up of its own (a node process serves one cluster) in a directory of the run's; then the
// ratio of the rounds' mean TTFTs, as `crescent run --kv-send ab` prints it for one process.
int up_ab(const up_options& opt, up_result* out) {
  if (!opt.faults_path.empty())
    return fail("--kv-send ab compares two ways of sending KV; it carries out no fault plan");
  auto dir = make_run_dir(opt.run_dir);
  if (!dir)
    return fail(describe(dir.error()));
  int round = 0;
  return run_ab_rounds(
      [&](bool stream, std::vector<replay::request_result>& results) {
        up_options one = opt;
        one.run.kv_send = stream ? "stream" : "after";
        one.run_dir = *dir + "/" + one.run.kv_send + "-" + std::to_string(round++ / 2 + 1);
        up_result r;
        const int rc = up_command(one, &r);
        if (out != nullptr)
          out->results.insert(out->results.end(), r.results.begin(), r.results.end());
        results = std::move(r.results);
        return rc;
      },
      *dir);
}

} // namespace

int up_command(const up_options& opt, up_result* out) {
  spdlog::set_level(opt.run.verbose ? spdlog::level::info : spdlog::level::err);
  if (opt.run.requests == 0 || opt.run.speedup <= 0 || opt.run.output_scale <= 0)
    return fail("--requests, --speedup and --output-scale must be positive");
  if (opt.run.kv_send == "ab")
    return up_ab(opt, out);
  auto p = prepare(opt);
  if (!p)
    return fail(describe(p.error()));
  watch_signals();
  auto config_path = std::filesystem::absolute(opt.cluster_path).string();
  std::unique_ptr<up::netns_network> network;
  if (opt.netns) {
    auto net = make_network(*p, config_path, opt.link_mbit);
    if (!net)
      return fail("--netns: " + describe(net.error()));
    network = std::move(*net);
  } else if (opt.run.kv_send != "config") {
    // The node processes read the cluster file: theirs says how their prefill instances send.
    config_path = p->run_dir + "/cluster.yaml";
    std::ofstream{config_path} << format_cluster_config(p->cfg);
  }
  const auto transfer_faults = up::transfer_faults_of(p->plan);
  std::vector<std::string> node_flags;
  if (!transfer_faults.empty())
    node_flags = {"--transfer-faults", up::format_transfer_faults(transfer_faults), "--fault-seed",
                  std::to_string(opt.seed)};
  auto nodes = up::launch_nodes(p->cfg, config_path, p->run_dir,
                                std::chrono::milliseconds(p->cfg.join_timeout_ms), network.get(),
                                node_flags);
  if (!nodes)
    return fail(describe(nodes.error()));
  std::vector<std::unique_ptr<up::message_gate>> gates;
  if (std::any_of(p->plan.faults.begin(), p->plan.faults.end(),
                  [&](const up::fault& f) { return f.is_gate_fault(opt.netns); })) {
    auto started_gates = start_gates(*p, opt.seed);
    if (!started_gates) {
      up::stop_nodes(*nodes);
      return fail("message gates: " + describe(started_gates.error()));
    }
    gates = std::move(*started_gates);
  }
  {
    std::lock_guard<std::mutex> guard{registry().mutex};
    for (const auto& x : *nodes)
      registry().pids.push_back(x.process.pid());
  }
  write_processes(p->run_dir, *nodes);
  auto header = format_header(opt.run, p->cfg, p->requests.size());
  fmt::print("{}  run         {} ({} node processes, {} faults planned)\n", header, p->run_dir,
             nodes->size(), p->plan.faults.size());
  if (opt.netns)
    fmt::print("  network     each node process in a network namespace, its link {}\n",
               opt.link_mbit == 0 ? std::string{"not limited"}
                                  : fmt::format("{} Mbit/s each way", opt.link_mbit));
  std::fflush(stdout);
  std::vector<up::message_gate*> gate_ptrs;
  for (auto& g : gates)
    gate_ptrs.push_back(g.get());
  // A kill's restart_after_ms: the node's new process, known to the signal watcher and listed
  // with the others; the main process's watch takes the node back (rejoin_interval_ms).
  auto restart = [&](uint32_t n) {
    auto x = up::launch_node_again(
        p->cfg, config_path, p->run_dir + "/node-" + std::to_string(n) + "-restarted.log", n,
        std::chrono::milliseconds(p->cfg.join_timeout_ms), network.get(), node_flags);
    if (x) {
      std::lock_guard<std::mutex> guard{registry().mutex};
      registry().pids.push_back(x->process.pid());
      std::ofstream{p->run_dir + "/processes.txt", std::ios::app} << "node " << n << " "
                                                                  << x->process.pid() << "\n";
    }
    return x;
  };
  up::fault_runner faults{p->plan,       *nodes,    p->run_dir + "/faults.log",
                          network.get(), gate_ptrs, restart};
  std::vector<std::string> unsettled;
  std::vector<uint32_t> ended_early; // node processes that ended during the run, not killed
  auto settle = [&](caf::actor_system& sys, cluster& cl) {
    faults.stop(); // no more faults: a paused node resumes, and the cluster must heal
    for (auto& x : *nodes)
      if (x.paused && x.process.signal(SIGCONT))
        x.paused = false;
    // Killed, or ended on its own: cut off past connection_timeout_ms, its connections closed
    // and its cluster gone (or a crash). Such a process may end while the audit waits (its
    // own timeout runs out after the main process's), so this is asked again at each try.
    auto lost = [&] {
      std::set<uint32_t> out;
      for (auto& x : *nodes)
        if (x.killed || !x.process.running())
          out.insert(x.node);
      return out;
    };
    // A node silent for the heartbeat timeout needs one more beat and check to count again.
    const auto within = std::chrono::milliseconds(p->cfg.conductor.heartbeat_timeout_ms +
                                                  2 * p->cfg.heartbeat_interval_ms + 5000);
    unsettled = up::audit_settled(sys, cl, lost, within);
    for (auto& x : *nodes)
      if (!x.killed && !x.process.running())
        ended_early.push_back(x.node); // lost like a killed node, and named in the report
  };
  // This process's engine serves its own nodes: it takes the transfer faults too.
  auto started = [&](cluster& cl) {
    if (!gates.empty()) {
      // At bring-up, and again at each rejoin: a node's new process has new actors (and a new
      // CAF node id after a kill), which the plan's roles must name too.
      auto tell_gates = [&gates, &cfg = cl.config()](const directory& dir) {
        auto gate_dir = gate_directory_of(dir, cfg);
        for (auto& g : gates)
          g->set_directory(gate_dir);
      };
      tell_gates(cl.dir());
      cl.on_published(tell_gates);
    }
    if (!transfer_faults.empty())
      if (auto err = up::install_transfer_faults(cl.transfer(), transfer_faults, opt.seed,
                                                 cluster_nodes_max))
        fmt::print(stderr, "crescent up: transfer faults in the main process: {}\n", describe(err));
    faults.start();
  };
  auto run = replay::replay_in_real_time(p->cfg, p->requests, opt.run.progress ? stderr : nullptr,
                                         started, settle, opt.run.kv_send == "pairs");
  faults.stop();
  std::vector<std::string> node_logs;
  for (const auto& x : *nodes)
    node_logs.push_back(x.log_path);
  up::stop_nodes(*nodes);
  {
    std::lock_guard<std::mutex> guard{registry().mutex};
    registry().pids.clear();
  }
  if (!run)
    return fail(describe(run.error()) + " (node logs in " + p->run_dir + ")");
  if (opt.run.progress)
    fmt::print(stderr, "\n");
  auto invariants = up::check_invariants(p->cfg, p->requests, run->results);
  invariants.violations.insert(invariants.violations.end(), unsettled.begin(), unsettled.end());
  const auto report =
      header + format_report(*run, p->cfg) + format_failures(run->results) +
      fmt::format("faults        {} of {} carried out (faults.log)\n", faults.injected(),
                  p->plan.faults.size()) +
      (transfer_faults.empty() ? std::string{} : format_slices_taken(node_logs)) +
      (gates.empty() ? std::string{} : format_gate_counts(gates)) +
      format_ended_early(ended_early, p->run_dir) + up::format_invariants(invariants) +
      (unsettled.empty() ? "settled       the conductor counts every node not "
                           "killed or lost as live and no request in flight; no "
                           "decode reservation, read lease or lost two-replica "
                           "block is left\n"
                         : std::string{}) +
      (opt.run.kv_send == "pairs" ? format_kv_send_pairs(p->requests.size() / 2, run->results)
                                  : std::string{});
  fmt::print("{}", report.substr(header.size()));
  std::ofstream{p->run_dir + "/report.txt"} << report;
  write_requests(p->run_dir, run->results);
  const auto summary = replay::summarize(run->results);
  const int status = summary.failed == 0 && invariants.held() ? 0 : 1;
  if (out != nullptr)
    *out = {std::move(run->results), std::move(invariants.violations), faults.injected()};
  return status;
}

} // namespace crescent::cli
