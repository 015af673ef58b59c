// Interface of a block owner: one per node, it owns the node's DRAM tier and SSD tier of KV
// blocks and decides what to evict; the store master decides whether it may.
#pragma once

#include "actors/store_master/store_master_actor.hpp"
#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using block_owner_actor = caf::typed_actor<
    // Allocate -> AllocateReply: DRAM space for new blocks (from the store master)
    caf::replies_to<allocate_atom,
                    typed_envelope<wire::Allocate>>::with<typed_envelope<wire::AllocateReply>>,
    // FreeBlocks: forget blocks, DRAM and SSD (from the store master)
    caf::replies_to<free_atom, typed_envelope<wire::FreeBlocks>>::with<void>,
    // Promote -> PromoteReply: copy SSD-only blocks back into DRAM (from the store master)
    caf::replies_to<promote_atom,
                    typed_envelope<wire::Promote>>::with<typed_envelope<wire::PromoteReply>>,
    // Touch: these blocks were used, in this order (from the store master only; no reply)
    caf::reacts_to<touch_atom, typed_envelope<wire::Touch>>,
    // VerifyBlock -> VerifyReply: is the DRAM copy intact? (from the store master only)
    caf::replies_to<verify_atom,
                    typed_envelope<wire::VerifyBlock>>::with<typed_envelope<wire::VerifyReply>>,
    // -> OwnerReport: what this owner holds (the store master asks after it restarted)
    caf::replies_to<report_atom>::with<typed_envelope<wire::OwnerReport>>,
    // -> OwnerStats
    caf::replies_to<stats_atom>::with<typed_envelope<wire::OwnerStats>>,
    // internal: start (report to the master), then heartbeat every interval
    caf::reacts_to<start_atom>, caf::reacts_to<tick_atom>,
    // internal, simulated time: promotion N's modeled SSD reads have ended (from itself only)
    caf::reacts_to<promote_atom, uint64_t>,
    // in-process only: serve this (new) store master from now on, reporting to it first
    caf::reacts_to<join_atom, store_master_actor>>;

} // namespace crescent
