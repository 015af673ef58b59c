// Interface of a block owner: one per node, it owns the node's DRAM tier and SSD tier of KV
// blocks and decides what to evict; the store master decides whether it may.
#pragma once

#include "actors/store_master/store_master_actor.hpp"
#include "messages/atoms.hpp"
#include "messages/envelope.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using block_owner_actor = caf::typed_actor<
    // Allocate -> AllocateReply: DRAM space for new blocks (from the store master)
    caf::replies_to<allocate_atom, envelope>::with<envelope>,
    // FreeBlocks: forget blocks, DRAM and SSD (from the store master)
    caf::replies_to<free_atom, envelope>::with<void>,
    // Promote -> PromoteReply: copy SSD-only blocks back into DRAM (from the store master)
    caf::replies_to<promote_atom, envelope>::with<envelope>,
    // Touch: these blocks were used, in this order (from the store master only; no reply)
    caf::reacts_to<touch_atom, envelope>,
    // VerifyBlock -> VerifyReply: is the DRAM copy intact? (from the store master only)
    caf::replies_to<verify_atom, envelope>::with<envelope>,
    // -> OwnerReport: what this owner holds (the store master asks after it restarted)
    caf::replies_to<report_atom>::with<envelope>,
    // -> OwnerStats
    caf::replies_to<stats_atom>::with<envelope>,
    // internal: start (report to the master), then heartbeat every interval
    caf::reacts_to<start_atom>, caf::reacts_to<tick_atom>,
    // in-process only: serve this (new) store master from now on, reporting to it first
    caf::reacts_to<join_atom, store_master_actor>>;

} // namespace crescent
