// The node agent: membership and liveness of one node. It watches the node's actors and sends
// the conductor a heartbeat every interval while all of them live. When one dies it stops, so
// the conductor stops placing work on the node within its heartbeat timeout.
//
// A node hosted by a `crescent node` process (node_config::address) is joined by the cluster's
// main process through its agent: the join carries the main process's terms (node, model,
// page size, decode instances) and how to reach its memory; the agent refuses terms that differ
// from its own, and otherwise answers with its node's actors and how to reach their memory, and
// hands its block owner the store master. Once every node has joined, the main process sends
// each the rest of the directory its prefill workers need (every decode worker, how to reach
// every process's memory). It sends it again when a node rejoins (a new process at a lost
// node's address: its actors and memory are new); only the cluster's process may. A hosted node
// serves one cluster: a second join is refused. When the main process goes away (the
// conductor's down message) the agent exits with the conductor's reason: remote_link_unreachable
// when the connection was lost rather than the cluster ended, after which `crescent node` may
// start the node afresh and wait to be taken back (rejoin_wait_ms).
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/cluster/directory.hpp"
#include "actors/decode_worker/decode_worker_actor.hpp"
#include "actors/node_agent/node_agent_actor.hpp"
#include "actors/prefill_worker/prefill_worker_actor.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_control_block.hpp>
#include <caf/actor_system.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

namespace crescent {

/// The agent of a node of the embedded cluster: the conductor comes from `dir` at start.
node_agent_actor spawn_node_agent(caf::actor_system& sys, uint32_t node,
                                  std::chrono::milliseconds interval,
                                  std::vector<caf::strong_actor_ptr> watched, directory_ref dir);

/// What the agent of a hosted node offers the cluster that joins it.
struct hosted_node {
  uint32_t node = 0;
  uint64_t model_fingerprint = 0;
  uint64_t page_bytes = 0;
  uint32_t first_decode_instance = 0;
  uint32_t first_prefill_instance = 0;
  uint32_t cluster_decode_instances = 0;  // of the whole cluster, from the same cluster file
  uint32_t cluster_prefill_instances = 0; // likewise
  block_owner_actor owner;
  std::vector<decode_worker_actor> decode;   // instance order
  std::vector<prefill_worker_actor> prefill; // instance order
  std::shared_ptr<transport::transfer_engine> transfer;
  // What the node's workers read: the agent publishes the join's conductor and store master,
  // and each directory message's workers, before bring-up (or a rejoin) starts any request.
  std::shared_ptr<directory_cell> dir;

  /// The node's actors: its block owner and workers (what the agent watches).
  std::vector<caf::strong_actor_ptr> actors() const;
};

/// The agent of a node hosted by this process: the conductor comes with the join. With
/// `join_within`, the agent exits (normally) if no cluster joins it by then.
node_agent_actor
spawn_hosted_node_agent(caf::actor_system& sys, std::chrono::milliseconds interval,
                        hosted_node hosted,
                        std::optional<std::chrono::milliseconds> join_within = std::nullopt);

} // namespace crescent
