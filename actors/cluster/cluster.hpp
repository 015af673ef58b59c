// Bring-up of a whole cluster inside one actor system: the embedded cluster of `crescent run`
// and of the tests. It creates the memory, engines and metadata store every actor needs first,
// so that configuration and resource errors surface here as errors, before any actor runs.
//
// Nodes with an address (cluster_config.hpp) run in `crescent node` processes: bring-up joins
// each (actors/node_agent/node_agent.hpp), waiting up to join_timeout_ms for it to listen, and
// fails if one cannot be joined. The actor system must then have the middleman loaded, and the
// transfer engine serves this process's nodes over its data-plane server (transfer.bind_host),
// so the KV hand-off to a hosted decode instance takes shared memory or TCP.
//
// A hosted node whose process is lost is taken back when a new agent answers at its address: a
// new process after a kill, or the same process started afresh after its connection closed
// (rejoin_wait_ms). rejoin_node does it; a thread of the cluster calls it every
// rejoin_interval_ms for each lost node that something listens for (0: only when asked).
//
// Shutdown: stop() asks every actor of this process to exit; the caller then waits for the actor
// system to drain (actor_system::await_all_actors_done) before destroying the cluster, which
// removes the temporary metadata directory if it created one.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "actors/cluster/directory.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "actors/request/request.hpp"
#include "gpu/shared_cores.hpp"
#include "storage/dram_arena.hpp"
#include "storage/dram_pool.hpp"
#include "storage/object_store.hpp"
#include "storage/ssd_tier.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace crescent {

/// Heartbeats and the silence after which a connection closes, for the actor systems of the
/// cluster's processes (connection_heartbeat_ms, connection_timeout_ms).
connection_liveness connection_liveness_of(const cluster_config& cfg);

class cluster {
 public:
  static caf::expected<std::unique_ptr<cluster>> start(caf::actor_system& sys,
                                                       const cluster_config& cfg);

  ~cluster();
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  /// Where every actor is now (the latest directory published).
  const directory& dir() const { return cell_->current(); }
  const cluster_config& config() const { return cfg_; }
  transport::transfer_engine& transfer() { return *transfer_; }
  /// The modeled links of a simulated cluster (a modeled engine); null otherwise.
  const transport::modeled_links* links() const { return links_.get(); }
  request_options request_defaults() const;

  /// Spawns a request actor for this cluster; send it (run_atom, RequestSpec).
  request_actor spawn_request();

  /// Takes hosted node `n` back after its `crescent node` process was lost (killed, or ended
  /// when its connection closed) and another was started at its address. The join is bring-up's,
  /// with the same checks, but waits at most 10 rejoin_interval_ms (at least 1 s, never past
  /// join_timeout_ms): a process that answered comes at once unless it is the lost one going
  /// away. Then this process's actors read the new process's
  /// workers, every hosted node is sent the new directory (a node that cannot take it is logged
  /// and told again at its own rejoin), and the conductor places on the node again from its next
  /// liveness check, when it also readmits the node's block owner to the pool. What the lost
  /// process held is lost (its requests failed when it was). Refused with already_exists while
  /// the node's old agent lives, and for a node of this process. A rejoin that fails after the
  /// join leaves the directory as it was and ends the new process's agent (so its process
  /// exits, and another may try). Blocks; one rejoin at a time.
  caf::error rejoin_node(uint32_t n);

  /// Spawns node `n`'s actors anew after a kill ended them, in this process (simulated time's
  /// faults): its block owner (an empty DRAM pool; its SSD tier as the old one left it), its
  /// workers and its agent, published to every actor of the process. The caller then hands the
  /// conductor the new agent (watch_atom, from an actor of this process) and starts the agent and
  /// the owner (start_atom), as a rejoin does. Returns the node's new actors, its agent first.
  /// Refused for a node of another process.
  caf::expected<std::vector<caf::actor>> restart_local_node(uint32_t n);

  /// `observer` sees every directory this cluster publishes from now on (a rejoin's or a
  /// restart's, and a failed rejoin's undoing), after this process's actors can read it and
  /// before the conductor places on a node it brings back. Called on the publishing thread (the
  /// rejoin watch's, or the caller of rejoin_node or restart_local_node) with a lock held: it
  /// must not call into the cluster. Replaces any earlier one; an empty function removes it.
  void on_published(std::function<void(const directory&)> observer);

  /// Asks every actor of the cluster to exit.
  void stop();

 private:
  cluster(caf::actor_system& sys, cluster_config cfg);
  caf::error create_transfer();
  caf::error spawn_storage();
  caf::error spawn_owner(uint32_t node);
  caf::error spawn_workers(std::optional<uint32_t> only = std::nullopt);
  void spawn_agent(uint32_t node);
  std::vector<caf::strong_actor_ptr> actors_of(uint32_t node) const; // its owner and workers
  // hosted_nodes.cpp
  caf::error join_hosted_nodes();
  // The whole join, reaching the process included, takes at most `limit`.
  caf::error join_hosted_node(caf::scoped_actor& self, uint32_t node,
                              std::chrono::milliseconds limit);
  caf::error take_back(caf::scoped_actor& self, uint32_t node);
  caf::error send_directory(caf::scoped_actor& self, uint32_t node);
  // rejoin_watch.cpp
  void start_rejoin_watch();
  void stop_rejoin_watch();
  void watch_rejoins();
  caf::error spawn_node_agents();
  // Publishes dir_ to this process's actors.
  caf::error publish();

  caf::actor_system& sys_;
  cluster_config cfg_;
  directory dir_; // bring-up's and rejoins' working copy; actors read what cell_ publishes
  std::shared_ptr<directory_cell> cell_;
  std::vector<std::optional<transport::peer_info>> peers_; // by node: hosted nodes' memory
  std::mutex rejoin_mutex_;
  std::mutex published_mutex_; // guards on_published_
  std::function<void(const directory&)> on_published_;
  std::thread watch_; // looks for lost nodes' new processes (rejoin_interval_ms)
  std::mutex watch_mutex_;
  std::condition_variable watch_wake_;
  bool watch_stopping_ = false;
  std::shared_ptr<transport::transfer_engine> transfer_;
  std::shared_ptr<transport::modeled_links> links_;
  std::shared_ptr<gpu::shared_cores> cores_; // a profile's shared cores, in simulated time
  std::string ssd_base_;                     // the block owners' SSD tiers: ssd_base_/node-<n>
  std::string temp_dir_; // created by start when cfg.store.db_path is empty; removed at the end
  std::vector<caf::strong_actor_ptr> all_;
};

} // namespace crescent
