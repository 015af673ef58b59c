// Interface of the conductor: the cluster's scheduler. It places each request on one prefill
// and one decode instance (or rejects it), and learns cache contents and load from reports.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <vector>

namespace crescent {

using finished_atom = caf::atom_constant<caf::atom("finished")>;

using conductor_actor = caf::typed_actor<
    // ScheduleRequest -> ScheduleReply (placed or rejected with a reason)
    caf::replies_to<schedule_atom, typed_envelope<wire::ScheduleRequest>>::with<
        typed_envelope<wire::ScheduleReply>>,
    // PrefillReport from a prefill worker when a job ends
    caf::replies_to<report_atom, typed_envelope<wire::PrefillReport>>::with<void>,
    // RequestReport from a request actor when it ends
    caf::replies_to<finished_atom, typed_envelope<wire::RequestReport>>::with<void>,
    // Heartbeat from a node agent; refused from any other sender
    caf::replies_to<heartbeat_atom, typed_envelope<wire::Heartbeat>>::with<void>,
    // BlocksGone from the store master (blocks evicted from a node); refused from any other
    caf::reacts_to<evicted_atom, typed_envelope<wire::BlocksGone>>,
    // bring-up, once, before any agent starts: each node's agent, by node id. The conductor
    // watches them; a node whose agent is gone takes no new requests from then on.
    caf::reacts_to<watch_atom, std::vector<caf::actor>>,
    // a rejoin (cluster::rejoin_node), from this process only: the node's new agent, for a node
    // whose agent is gone. The node is placed on again from the next liveness check.
    caf::replies_to<watch_atom, uint32_t, caf::actor>::with<void>,
    // -> ConductorStats
    caf::replies_to<stats_atom>::with<typed_envelope<wire::ConductorStats>>,
    // internal, once bring-up told it the agents: look for nodes gone silent, every
    // liveness_check (their requests fail then, not at their deadlines)
    caf::reacts_to<tick_atom>>;

} // namespace crescent
