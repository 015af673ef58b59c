// Interface of a block owner: one per node, it owns the node's DRAM pool of KV blocks.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using block_owner_actor = caf::typed_actor<
    // Allocate -> AllocateReply (as many slots as are free, up to the count)
    caf::replies_to<allocate_atom, envelope>::with<envelope>,
    // FreeBlocks: return slots
    caf::replies_to<free_atom, envelope>::with<void>,
    // -> OwnerStats
    caf::replies_to<stats_atom>::with<envelope>>;

} // namespace crescent
