// Bring-up of the nodes hosted by `crescent node` processes: join each through its node agent
// and put its actors into the directory, before any actor reads it.
#include "actors/cluster/cluster.hpp"
#include "messages/checked_read.hpp"
#include "messages/errors.hpp"
#include "messages/schema/cluster.capnp.h"
#include "messages/wire_version.hpp"
#include "transport/peer_wire.hpp"

#include <caf/actor_cast.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace crescent {

namespace {

using steady = std::chrono::steady_clock;

// A rejoin's join waits at least this long (10 rejoin intervals, and never past join_timeout_ms).
constexpr int64_t rejoin_join_ms_min = 1000;

struct welcome {
  typed_envelope<wire::NodeWelcome> terms;
  caf::actor owner;
  std::vector<caf::actor> decode;
  std::vector<caf::actor> prefill;
};

std::string where(uint32_t node, const std::string& address) {
  return "node " + std::to_string(node) + " at " + address;
}

// The node process may still be starting: try until the deadline, whatever the error (a
// handshake cut short included, as remote_actor_of would; its own retries could outlast the
// deadline).
caf::expected<node_agent_actor> reach(caf::actor_system& sys, const node_address& a,
                                      steady::time_point deadline) {
  for (;;) {
    auto agent = sys.middleman().remote_actor<node_agent_actor>(a.host, a.port);
    if (agent || steady::now() >= deadline)
      return agent;
    poll(nullptr, 0, 100);
  }
}

typed_envelope<wire::NodeJoin> join_terms(const cluster_config& cfg, uint32_t node,
                                          const transport::peer_info& self) {
  return make_envelope<wire::NodeJoin>([&](wire::NodeJoin::Builder out) {
    out.setNode(node);
    out.setModelFingerprint(cfg.model.fingerprint());
    out.setPageBytes(cfg.model.page_bytes());
    out.setFirstDecodeInstance(first_decode_instance(cfg, node));
    out.setDecodeInstances(cfg.nodes[node].decode_instances);
    out.setFirstPrefillInstance(first_prefill_instance(cfg, node));
    out.setPrefillInstances(cfg.nodes[node].prefill_instances);
    out.setWireVersion(wire_version);
    transport::to_wire(self, out.initPeer());
  });
}

// The welcome comes from another process: checked like any input. Its memory must be the
// node's own, or the engine would route another node's operations there.
caf::expected<transport::peer_info> check_welcome(const cluster_config& cfg, uint32_t node,
                                                  const caf::node_id& agent_node,
                                                  const welcome& w) {
  auto peer = read_as<wire::NodeWelcome>(
      w.terms, [&](wire::NodeWelcome::Reader in) -> caf::expected<transport::peer_info> {
        if (auto err = check_wire_version(in.getWireVersion(), "it", "this process"))
          return err;
        if (in.getNode() != node || in.getDecodeInstances() != cfg.nodes[node].decode_instances ||
            in.getPrefillInstances() != cfg.nodes[node].prefill_instances)
          return make_error(errc::invalid_argument,
                            "it answered as another node or with other instances");
        return transport::from_wire(in.getPeer());
      });
  if (!peer)
    return peer;
  if (peer->nodes != std::vector<uint32_t>{node})
    return make_error(errc::invalid_argument, "its memory is described as another node's");
  if (w.decode.size() != cfg.nodes[node].decode_instances ||
      w.prefill.size() != cfg.nodes[node].prefill_instances)
    return make_error(errc::invalid_argument, "it named other instances than its node has");
  // Every handle names an actor of the agent's process: the node's actors live nowhere else.
  auto elsewhere = [&](const caf::actor& a) { return !a || a.node() != agent_node; };
  if (elsewhere(w.owner) || std::any_of(w.decode.begin(), w.decode.end(), elsewhere) ||
      std::any_of(w.prefill.begin(), w.prefill.end(), elsewhere))
    return make_error(errc::invalid_argument, "it named actors that are missing or elsewhere");
  return peer;
}

// What each hosted node's prefill workers need once every node has joined: every decode
// worker, and how to reach every process's memory (pool blocks and decode pages live anywhere).
typed_envelope<wire::ClusterDirectory>
cluster_directory(const std::vector<transport::peer_info>& peers, size_t decode) {
  return make_envelope<wire::ClusterDirectory>([&](wire::ClusterDirectory::Builder out) {
    auto list = out.initPeers(static_cast<unsigned>(peers.size()));
    for (unsigned i = 0; i < peers.size(); ++i)
      transport::to_wire(peers[i], list[i]);
    out.setDecodeInstances(static_cast<uint32_t>(decode));
  });
}

std::chrono::milliseconds time_left(steady::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()));
}

} // namespace

caf::error cluster::join_hosted_node(caf::scoped_actor& self, uint32_t n,
                                     std::chrono::milliseconds limit) {
  const auto& address = cfg_.nodes[n].address;
  auto a = parse_node_address(address); // validated already
  const auto deadline = steady::now() + limit;
  auto agent = reach(sys_, *a, deadline);
  if (!agent)
    return make_error(errc::unavailable, where(n, address) +
                                             ": no `crescent node` process answered within "
                                             "join_timeout_ms: " +
                                             describe(agent.error()));
  caf::error err;
  welcome w;
  self->request(*agent, time_left(deadline), join_atom::value,
                join_terms(cfg_, n, transfer_->self_info()),
                caf::actor_cast<caf::actor>(dir_.conductor),
                caf::actor_cast<caf::actor>(dir_.store_master))
      .receive(
          [&](typed_envelope<wire::NodeWelcome>& terms, caf::actor& owner,
              std::vector<caf::actor>& decode, std::vector<caf::actor>& prefill) {
            w = welcome{std::move(terms), std::move(owner), std::move(decode), std::move(prefill)};
          },
          [&](caf::error& e) { err = std::move(e); });
  if (err)
    return make_error(errc::unavailable, where(n, address) + " refused to join: " + describe(err));
  auto peer = check_welcome(cfg_, n, agent->node(), w);
  if (!peer)
    return make_error(errc::invalid_argument, where(n, address) + ": " + describe(peer.error()));
  if (auto e = transfer_->add_peer(*peer))
    return make_error(errc::unavailable, where(n, address) + ": " + describe(e));
  dir_.node_agents[n] = *agent;
  dir_.block_owners[n] = caf::actor_cast<block_owner_actor>(w.owner);
  place_typed(w.decode, dir_.decode, first_decode_instance(cfg_, n));
  place_typed(w.prefill, dir_.prefill, first_prefill_instance(cfg_, n));
  peers_[n] = std::move(*peer);
  return caf::none;
}

// Every process's memory (this one's and each joined node's) and every worker: what a hosted
// node's workers need of the rest of the cluster.
caf::error cluster::send_directory(caf::scoped_actor& self, uint32_t n) {
  std::vector<transport::peer_info> peers{transfer_->self_info()};
  for (const auto& p : peers_)
    if (p)
      peers.push_back(*p);
  caf::error err;
  self->request(dir_.node_agents[n], std::chrono::milliseconds(cfg_.join_timeout_ms),
                directory_atom::value, cluster_directory(peers, dir_.decode.size()),
                untyped(dir_.decode), untyped(dir_.prefill))
      .receive([] {}, [&](caf::error& e) { err = std::move(e); });
  if (err)
    return make_error(errc::unavailable, where(n, cfg_.nodes[n].address) +
                                             " did not take the directory: " + describe(err));
  return caf::none;
}

caf::error cluster::join_hosted_nodes() {
  if (!spans_processes(cfg_))
    return caf::none;
  if (!sys_.has_middleman())
    return make_error(errc::bad_config, "nodes with an address need an actor system with the "
                                        "middleman loaded (setup_actor_system networked)");
  caf::scoped_actor self{sys_};
  peers_.assign(cfg_.nodes.size(), std::nullopt);
  for (uint32_t n = 0; n < cfg_.nodes.size(); ++n)
    if (cfg_.nodes[n].hosted_elsewhere())
      if (auto err = join_hosted_node(self, n, std::chrono::milliseconds(cfg_.join_timeout_ms)))
        return err;
  // Every node has joined: this process's workers learn where the hosted ones are, and each
  // hosted node learns the rest, before any request can start.
  if (auto err = publish())
    return err;
  for (uint32_t n = 0; n < cfg_.nodes.size(); ++n)
    if (cfg_.nodes[n].hosted_elsewhere())
      if (auto err = send_directory(self, n))
        return err;
  return caf::none;
}

namespace {

// Whether `agent` is gone: a killed process's actors are, once its connection closed. Monitoring
// an actor that is gone already answers at once.
bool agent_gone(caf::scoped_actor& self, const node_agent_actor& agent) {
  if (!agent)
    return true;
  self->monitor(agent);
  bool gone = false;
  self->receive([&](caf::down_msg&) { gone = true; },
                caf::after(std::chrono::milliseconds(100)) >> [] {});
  if (!gone)
    self->demonitor(agent.address());
  return gone;
}

} // namespace

caf::error cluster::rejoin_node(uint32_t n) {
  std::lock_guard guard{rejoin_mutex_};
  if (n >= cfg_.nodes.size() || !cfg_.nodes[n].hosted_elsewhere())
    return make_error(errc::invalid_argument,
                      "node " + std::to_string(n) +
                          " is not hosted by a `crescent node` process of this cluster");
  caf::scoped_actor self{sys_};
  if (!agent_gone(self, dir_.node_agents[n]))
    return make_error(errc::already_exists,
                      where(n, cfg_.nodes[n].address) +
                          " is still in the cluster: only a node whose process was lost rejoins");
  const auto before = dir_;
  const auto peer_before = peers_[n];
  // A process that answered the watch's check answers a join at once, unless it is going away:
  // the lost process itself, whose middleman may answer in the moment it runs again (a node
  // paused past the connection timeout) before it starts afresh. Its join then never answers;
  // waiting join_timeout_ms (made for processes still starting) would hold every rejoin that
  // long, so a rejoin waits less and the watch tries again.
  const auto limit = std::min(std::chrono::milliseconds(cfg_.join_timeout_ms),
                              std::max(std::chrono::milliseconds(rejoin_join_ms_min),
                                       10 * std::chrono::milliseconds(cfg_.rejoin_interval_ms)));
  if (auto err = join_hosted_node(self, n, limit))
    return err;
  if (auto err = take_back(self, n)) {
    // [rare] Joined but not taken back: the lost process's directory stands again, and the new
    // one's agent ends, which ends its process, so that a later one may try again.
    caf::anon_send_exit(dir_.node_agents[n], caf::exit_reason::user_shutdown);
    dir_ = before;
    peers_[n] = peer_before;
    if (auto undone = publish())
      spdlog::error("rejoin of node {}: {}", n, describe(undone));
    return err;
  }
  spdlog::info("node {} rejoined the cluster from {}", n, cfg_.nodes[n].address);
  return caf::none;
}

caf::error cluster::take_back(caf::scoped_actor& self, uint32_t n) {
  if (auto err = publish())
    return err;
  // The new process first: it needs the directory before the conductor places on it. The other
  // nodes then learn its workers and memory; one that cannot (it is gone itself, or cut off) is
  // told again when it rejoins, and until then its requests that need this node fail.
  if (auto err = send_directory(self, n))
    return err;
  for (uint32_t k = 0; k < cfg_.nodes.size(); ++k)
    if (k != n && cfg_.nodes[k].hosted_elsewhere())
      if (auto err = send_directory(self, k))
        spdlog::warn("rejoin of node {}: {}", n, describe(err));
  caf::error err;
  self->request(dir_.conductor, std::chrono::milliseconds(cfg_.join_timeout_ms), watch_atom::value,
                n, caf::actor_cast<caf::actor>(dir_.node_agents[n]))
      .receive([] {}, [&](caf::error& e) { err = std::move(e); });
  if (err)
    return make_error(errc::unavailable, "the conductor did not take node " + std::to_string(n) +
                                             " back: " + describe(err));
  // Asked, not told: a message fault in the path (a gate's drop) may lose a start or its
  // answer, and a node never started would stay silent, taken back but never placed on. Starting
  // twice does no harm (an agent beats once, an owner reports again).
  const auto per_try = std::chrono::milliseconds(std::max<uint64_t>(1, cfg_.join_timeout_ms / 4));
  auto start = [&](const auto& who, const char* what) -> caf::error {
    caf::error last;
    for (int tries = 0; tries < 4; ++tries) {
      last = caf::none;
      self->request(who, per_try, start_atom::value)
          .receive([] {}, [&](caf::error& e) { last = std::move(e); });
      if (!last)
        return caf::none;
    }
    return make_error(errc::unavailable, "node " + std::to_string(n) + "'s " + what +
                                             " did not answer its start: " + describe(last));
  };
  if (auto err = start(dir_.node_agents[n], "agent"))
    return err;
  return start(dir_.block_owners[n], "block owner");
}

} // namespace crescent
