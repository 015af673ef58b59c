#include "apps/node/node_command.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/cluster/cluster_config.hpp"
#include "actors/cluster/node_spawn.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "actors/node_agent/node_agent.hpp"
#include "apps/replay/transfer_report.hpp"
#include "apps/up/transfer_faults.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <optional>
#include <thread>

namespace crescent::cli {

namespace {

volatile std::sig_atomic_t stop_signal = 0;

int fail(const std::string& what) {
  fmt::print(stderr, "crescent node: {}\n", what);
  return 2;
}

caf::expected<uint16_t> listen_port(const node_options& opt, const node_config& n) {
  if (opt.port >= 0)
    return static_cast<uint16_t>(opt.port);
  if (n.address.empty())
    return make_error(errc::bad_config,
                      "nodes[" + std::to_string(opt.node) + "] has no address: give --port");
  auto a = parse_node_address(n.address);
  if (!a)
    return std::move(a.error());
  return a->port;
}

// Where this process listens, its agent and its data plane alike: the host of the node's
// address (what other processes reach it by), or transfer.bind_host for a node given none.
std::string listen_host(const cluster_config& cfg, const node_config& n) {
  if (auto a = parse_node_address(n.address))
    return a->host;
  return cfg.transfer.bind_host;
}

caf::expected<std::shared_ptr<transport::transfer_engine>>
node_engine(const cluster_config& cfg, uint32_t node, const std::string& host) {
  return transport::transfer_engine::create(transfer_options_for(cfg, {node}, host));
}

void stop_all(const std::vector<caf::strong_actor_ptr>& actors) {
  for (const auto& a : actors)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

caf::expected<hosted_node> spawn_node(caf::actor_system& sys, const cluster_config& cfg,
                                      const node_options& opt,
                                      std::shared_ptr<transport::transfer_engine> engine) {
  const auto& n = cfg.nodes[opt.node];
  std::string ssd_dir = opt.ssd_dir;
  if (ssd_dir.empty() && !cfg.store.ssd_dir.empty())
    ssd_dir = cfg.store.ssd_dir + "/node-" + std::to_string(opt.node);
  hosted_node h;
  h.node = opt.node;
  h.model_fingerprint = cfg.model.fingerprint();
  h.page_bytes = cfg.model.page_bytes();
  h.first_decode_instance = first_decode_instance(cfg, opt.node);
  h.first_prefill_instance = first_prefill_instance(cfg, opt.node);
  h.cluster_decode_instances = first_decode_instance(cfg, static_cast<uint32_t>(cfg.nodes.size()));
  h.cluster_prefill_instances =
      first_prefill_instance(cfg, static_cast<uint32_t>(cfg.nodes.size()));
  h.transfer = engine;
  h.dir = std::make_shared<directory_cell>();
  // The master comes with the join; until then the owner neither reports nor beats.
  auto owner = spawn_node_owner(sys, cfg, opt.node, engine, ssd_dir, store_master_actor{},
                                engine->self_info());
  if (!owner)
    return std::move(owner.error());
  h.owner = std::move(*owner);
  auto undo = [&](caf::error err) {
    stop_all(h.actors());
    return caf::expected<hosted_node>{std::move(err)};
  };
  for (uint32_t k = 0; k < n.decode_instances; ++k) {
    auto worker =
        spawn_decode_instance(sys, cfg, h.first_decode_instance + k, opt.node, engine, h.dir);
    if (!worker)
      return undo(std::move(worker.error()));
    h.decode.push_back(std::move(*worker));
  }
  // Prefill workers read the directory the agent fills from the join and the directory message.
  for (uint32_t k = 0; k < n.prefill_instances; ++k) {
    auto worker =
        spawn_prefill_instance(sys, cfg, h.first_prefill_instance + k, opt.node, engine, h.dir);
    if (!worker)
      return undo(std::move(worker.error()));
    h.prefill.push_back(std::move(*worker));
  }
  return h;
}

// Why serve() returned.
enum class served_until {
  stopped,         // a stop signal, or the parent closed our standard input
  agent_left,      // the cluster ended, or nobody took the node back in time
  connection_lost, // the connection to the cluster closed: it may take the node back
};

// Blocks until the agent exits, a stop signal, or a closed stdin pipe.
served_until serve(caf::actor_system& sys, const node_agent_actor& agent) {
  std::signal(SIGINT, [](int) { stop_signal = 1; });
  std::signal(SIGTERM, [](int) { stop_signal = 1; });
  struct stat in {};
  const bool watch_stdin = fstat(STDIN_FILENO, &in) == 0 && S_ISFIFO(in.st_mode);
  caf::scoped_actor self{sys};
  self->monitor(agent);
  std::optional<served_until> out;
  while (!out && stop_signal == 0) {
    self->receive(
        [&](caf::down_msg& down) {
          out = down.reason == caf::exit_reason::remote_link_unreachable
                    ? served_until::connection_lost
                    : served_until::agent_left;
        },
        caf::after(std::chrono::milliseconds(100)) >> [] {});
    if (watch_stdin) {
      pollfd p{STDIN_FILENO, POLLIN, 0};
      char c;
      if (poll(&p, 1, 0) > 0 && ::read(STDIN_FILENO, &c, 1) <= 0)
        break; // the parent closed our standard input
    }
  }
  return out.value_or(served_until::stopped);
}

// Stops the node's actors and waits (at most 10 s) until they are gone, their memory freed.
void stop_and_await(caf::actor_system& sys, std::vector<caf::strong_actor_ptr>& parts) {
  caf::scoped_actor self{sys};
  for (const auto& a : parts)
    self->monitor(a);
  stop_all(parts);
  size_t gone = 0;
  bool late = false;
  while (gone < parts.size() && !late)
    self->receive([&](caf::down_msg&) { ++gone; },
                  caf::after(std::chrono::seconds(10)) >> [&] { late = true; });
  parts.clear();
}

} // namespace

int node_command(const node_options& opt) {
  auto cfg = load_cluster_config(opt.config_path);
  if (!cfg)
    return fail(describe(cfg.error()));
  if (auto err = check_real_time(*cfg))
    return fail(opt.config_path + ": " + describe(err));
  if (opt.node >= cfg->nodes.size())
    return fail("--node " + std::to_string(opt.node) + ": the cluster file has " +
                std::to_string(cfg->nodes.size()) + " nodes");
  const auto& n = cfg->nodes[opt.node];
  auto port = listen_port(opt, n);
  if (!port)
    return fail(describe(port.error()));
  const auto host = listen_host(*cfg, n);
  auto engine = node_engine(*cfg, opt.node, host);
  if (!engine)
    return fail(describe(engine.error()));
  std::optional<std::vector<up::transfer_fault_spec>> transfer_faults;
  if (!opt.transfer_faults.empty()) {
    auto faults = up::parse_transfer_faults(opt.transfer_faults);
    if (!faults)
      return fail(describe(faults.error()));
    // Before the engine moves anything: the hook may not change under a batch in flight.
    if (auto err = up::install_transfer_faults(**engine, *faults, opt.fault_seed, opt.node))
      return fail(describe(err));
    transfer_faults = std::move(*faults);
  }
  process_actor_system actors{true, connection_liveness_of(*cfg)};
  auto& sys = actors.get();
  const auto interval = std::chrono::milliseconds(cfg->heartbeat_interval_ms);
  // The node serves until its cluster ends. Cut off from it (its connection closed), it starts
  // afresh at the same port and waits rejoin_wait_ms for the cluster to take it back.
  for (std::optional<std::chrono::milliseconds> join_within;;) {
    auto hosted = spawn_node(sys, *cfg, opt, *engine);
    if (!hosted)
      return fail(describe(hosted.error()));
    auto parts = hosted->actors();
    auto agent = spawn_hosted_node_agent(sys, interval, std::move(*hosted), join_within);
    auto published = sys.middleman().publish(agent, *port, host.c_str(), true);
    // The agent first: it must not take its node's actors stopping for a failure.
    parts.insert(parts.begin(), caf::actor_cast<caf::strong_actor_ptr>(agent));
    if (!published) {
      stop_all(parts);
      return fail("cannot listen on " + host + ":" + std::to_string(*port) + ": " +
                  sys.render(published.error()));
    }
    if (!join_within)
      fmt::print("crescent-node node={} port={} pid={}\n", opt.node, *published, getpid());
    else
      fmt::print("crescent-node node={} lost its cluster; started afresh, it waits {} ms to be "
                 "taken back\n",
                 opt.node, join_within->count());
    std::fflush(stdout);
    *port = *published; // the same port again after a loss: the cluster knows it by it
    const auto why = serve(sys, agent);
    sys.middleman().unpublish(agent, *port);
    stop_and_await(sys, parts);
    if (why != served_until::connection_lost || cfg->rejoin_wait_ms == 0)
      break;
    join_within = std::chrono::milliseconds(cfg->rejoin_wait_ms);
  }
  // What this process moved: `crescent run` counts only its own process's transfers.
  fmt::print("crescent-node node={} exits\n{}", opt.node,
             replay::format_transfer_metrics((*engine)->metrics()));
  if (transfer_faults) {
    const auto taken = up::transfer_faults_taken_here();
    fmt::print("crescent-node node={} transfer faults: {} slice attempts failed, {} corrupted, "
               "{} delayed\n",
               opt.node, taken.failed, taken.corrupted, taken.delayed);
  }
  std::fflush(stdout);
  return 0;
}

} // namespace crescent::cli
