// The store master: block metadata of the KV pool, placement of new blocks on block owners.
//
// Acknowledgement contract: a PutCommit is answered only after the records are synced to
// RocksDB, so an acknowledged block's metadata survives a crash of the master. Pending puts
// are not synced and are forgotten on restart (their writers never got a commit ack).
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/store_master/store_master_actor.hpp"
#include "storage/metadata_store.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace crescent {

store_master_actor spawn_store_master(caf::actor_system& sys,
                                      std::shared_ptr<storage::metadata_store> metadata,
                                      std::shared_ptr<const directory> dir);

} // namespace crescent
