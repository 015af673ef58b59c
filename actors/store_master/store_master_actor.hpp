// Interface of the store master: the KV pool's block metadata (key -> replicas, checksum, state,
// leases, pins), persisted in RocksDB, and the placement of new blocks on block owners.
// Put = put_start (allocate replicas), write them through the transfer engine, put_commit;
// get = get (replicas and a read lease), read, verify the checksum.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using store_master_actor = caf::typed_actor<
    // PutStart -> PutStartReply
    caf::replies_to<put_start_atom, envelope>::with<envelope>,
    // PutCommit: acknowledged only once the records are synced
    caf::replies_to<put_commit_atom, envelope>::with<void>,
    // PutRevoke
    caf::replies_to<put_revoke_atom, envelope>::with<void>,
    // Get -> GetReply (replicas in DRAM, promoting SSD-only blocks first; a read lease)
    caf::replies_to<get_atom, envelope>::with<envelope>,
    // Exists -> ExistsReply
    caf::replies_to<exists_atom, envelope>::with<envelope>,
    // Remove
    caf::replies_to<remove_atom, envelope>::with<void>,
    // Pin, Unpin
    caf::replies_to<pin_atom, envelope>::with<void>,
    caf::replies_to<unpin_atom, envelope>::with<void>,
    // ReportCorrupt: a reader saw a checksum mismatch in one replica
    caf::replies_to<corrupt_atom, envelope>::with<void>,
    // OwnerHeartbeat from a block owner
    caf::replies_to<owner_atom, heartbeat_atom, envelope>::with<void>,
    // OwnerReport -> OwnerReportReply: reconciliation after a restart
    caf::replies_to<owner_atom, report_atom, envelope>::with<envelope>,
    // EvictRequest -> EvictReply: may an owner drop these DRAM copies?
    caf::replies_to<evict_atom, envelope>::with<envelope>,
    // -> StoreStats
    caf::replies_to<stats_atom>::with<envelope>,
    // -> PoolPeers: how clients in other processes reach the owners' memory
    caf::replies_to<peers_atom>::with<envelope>,
    // begin watching the owners (sent by bring-up), then the periodic sweep
    caf::reacts_to<start_atom>, caf::reacts_to<tick_atom>,
    // write the queued commits (the master sends it to itself; from others it is harmless)
    caf::reacts_to<put_commit_atom>>;

} // namespace crescent
