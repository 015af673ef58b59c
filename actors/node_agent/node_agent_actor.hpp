// Interface of a node agent: one per node (per process, once clusters span processes). It
// watches the node's actors and tells the conductor the node is alive.
#pragma once

#include "messages/atoms.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using node_agent_actor = caf::typed_actor<
    // begin heartbeats (sent by bring-up once the directory is complete)
    caf::reacts_to<start_atom>,
    // internal: one heartbeat interval passed
    caf::reacts_to<tick_atom>>;

} // namespace crescent
