// Interface of the store master: the KV pool's block metadata (key -> replicas, checksum, state,
// leases, pins), persisted in RocksDB, and the placement of new blocks on block owners.
// Put = put_start (allocate replicas), write them through the transfer engine, put_commit;
// get = get (replicas and a read lease), read, verify the checksum.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

/// A NodeStatus's reason, at most.
inline constexpr size_t node_status_reason_max = 512;

using store_master_actor = caf::typed_actor<
    // PutStart -> PutStartReply
    caf::replies_to<put_start_atom,
                    typed_envelope<wire::PutStart>>::with<typed_envelope<wire::PutStartReply>>,
    // PutCommit: acknowledged only once the records are synced
    caf::replies_to<put_commit_atom, typed_envelope<wire::PutCommit>>::with<void>,
    // PutRevoke
    caf::replies_to<put_revoke_atom, typed_envelope<wire::PutRevoke>>::with<void>,
    // Get -> GetReply (replicas in DRAM, promoting SSD-only blocks first; a read lease)
    caf::replies_to<get_atom, typed_envelope<wire::Get>>::with<typed_envelope<wire::GetReply>>,
    // Exists -> ExistsReply
    caf::replies_to<exists_atom,
                    typed_envelope<wire::Exists>>::with<typed_envelope<wire::ExistsReply>>,
    // Remove
    caf::replies_to<remove_atom, typed_envelope<wire::Remove>>::with<void>,
    // Pin, Unpin
    caf::replies_to<pin_atom, typed_envelope<wire::Pin>>::with<void>,
    caf::replies_to<unpin_atom, typed_envelope<wire::Unpin>>::with<void>,
    // ReportCorrupt: a reader saw a checksum mismatch in one replica
    caf::replies_to<corrupt_atom, typed_envelope<wire::ReportCorrupt>>::with<void>,
    // OwnerHeartbeat from a block owner
    caf::replies_to<owner_atom, heartbeat_atom, typed_envelope<wire::OwnerHeartbeat>>::with<void>,
    // OwnerReport -> OwnerReportReply: reconciliation after a restart
    caf::replies_to<owner_atom, report_atom, typed_envelope<wire::OwnerReport>>::with<
        typed_envelope<wire::OwnerReportReply>>,
    // NodeStatus from the conductor only: a node left (its replicas go, as for an owner that
    // stopped) or came back (its owner rejoins by reporting). In a cluster the conductor's view
    // is the pool's; a master without a conductor judges owners by their own heartbeats.
    caf::reacts_to<membership_atom, typed_envelope<wire::NodeStatus>>,
    // EvictRequest -> EvictReply: may an owner drop these DRAM copies?
    caf::replies_to<evict_atom,
                    typed_envelope<wire::EvictRequest>>::with<typed_envelope<wire::EvictReply>>,
    // -> StoreStats
    caf::replies_to<stats_atom>::with<typed_envelope<wire::StoreStats>>,
    // -> PoolPeers: how clients in other processes reach the owners' memory
    caf::replies_to<peers_atom>::with<typed_envelope<wire::PoolPeers>>,
    // begin watching the owners (sent by bring-up), then the periodic sweep
    caf::reacts_to<start_atom>, caf::reacts_to<tick_atom>,
    // write the queued commits (the master sends it to itself; from others it is harmless)
    caf::reacts_to<put_commit_atom>>;

} // namespace crescent
