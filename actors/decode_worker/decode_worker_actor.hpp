// Interface of a decode worker: one per decode instance. It reserves KV memory for requests,
// receives their prompt KV from prefill workers, and decodes them in a continuous batch.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using decode_worker_actor = caf::typed_actor<
    // ReserveRequest -> ReserveReply (page handles), or an error (budget, memory)
    caf::replies_to<reserve_atom, envelope>::with<envelope>,
    // ReleaseRequest: drop a reservation that will not be used
    caf::replies_to<release_atom, envelope>::with<void>,
    // KvReady from the prefill worker: start decoding the request
    caf::replies_to<kv_ready_atom, envelope>::with<void>,
    // -> WorkerStats
    caf::replies_to<stats_atom>::with<envelope>,
    // internal: emit the last step's tokens and compute the next step
    caf::reacts_to<step_atom>>;

} // namespace crescent
