// Interface of the conductor: the cluster's scheduler. It places each request on one prefill
// and one decode instance (or rejects it), and learns cache contents and load from reports.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using finished_atom = caf::atom_constant<caf::atom("finished")>;

using conductor_actor = caf::typed_actor<
    // ScheduleRequest -> ScheduleReply (placed or rejected with a reason)
    caf::replies_to<schedule_atom, envelope>::with<envelope>,
    // PrefillReport from a prefill worker when a job ends
    caf::replies_to<report_atom, envelope>::with<void>,
    // RequestReport from a request actor when it ends
    caf::replies_to<finished_atom, envelope>::with<void>,
    // Heartbeat from a node agent
    caf::replies_to<heartbeat_atom, envelope>::with<void>,
    // -> ConductorStats
    caf::replies_to<stats_atom>::with<envelope>>;

} // namespace crescent
