// The store master: block metadata of the KV pool and placement of replicas on block owners.
//
// Acknowledgement contract: a PutCommit is answered only after the records are synced to
// RocksDB, so an acknowledged block's metadata survives a crash of the master. Pending puts are
// never persisted and are reclaimed after put_timeout. A node that leaves the conductor's view
// (NodeStatus; without a conductor: whose owner stops heartbeating for node_timeout, checked
// every `sweep`), or whose owner dies, leaves every replica list, except for its SSD replicas,
// which wait unserved for ssd_grace: an owner that restarts on the same SSD files gets them
// back. A block left without replicas is gone: an explicit miss, never wrong bytes.
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/store_master/store_master_actor.hpp"
#include "storage/object_store.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <memory>

namespace crescent {

struct store_master_options {
  uint32_t nodes = 0;
  std::chrono::milliseconds put_timeout{30000};
  std::chrono::milliseconds lease_ttl{5000};
  std::chrono::milliseconds node_timeout{5000};
  std::chrono::milliseconds sweep{500};
  // How long a lost node's SSD replicas stay in the metadata, unserved, waiting for the node to
  // come back with its files; 0: they leave with the node.
  std::chrono::milliseconds ssd_grace{600000};
  uint64_t placement_seed = 1; // random placement is reproducible
  /// A thread of its own, for its RocksDB syncs (actors/common/spawn_placement.hpp): real time
  /// only.
  bool own_thread = false;
};

store_master_actor spawn_store_master(caf::actor_system& sys, store_master_options options,
                                      std::shared_ptr<storage::object_store> objects,
                                      directory_ref dir);

} // namespace crescent
