// Interface of the store master: the KV pool's block metadata (key -> where, checksum, state),
// persisted in RocksDB. Put = put_start (allocate), write through the transfer engine,
// put_commit; get = get_prefix, read, verify the checksum.
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
    // GetPrefix -> GetPrefixReply
    caf::replies_to<get_prefix_atom, envelope>::with<envelope>,
    // ReportCorrupt: a reader saw a checksum mismatch
    caf::replies_to<corrupt_atom, envelope>::with<void>,
    // -> StoreStats
    caf::replies_to<stats_atom>::with<envelope>>;

} // namespace crescent
