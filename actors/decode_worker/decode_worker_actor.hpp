// Interface of a decode worker: one per decode instance. It reserves KV memory for requests,
// receives their prompt KV from prefill workers, and decodes them in a continuous batch.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using decode_worker_actor = caf::typed_actor<
    // ReserveRequest -> ReserveReply (page handles), or an error (budget, memory)
    caf::replies_to<reserve_atom,
                    typed_envelope<wire::ReserveRequest>>::with<typed_envelope<wire::ReserveReply>>,
    // ReleaseRequest: drop a reservation that will not be used
    caf::replies_to<release_atom, typed_envelope<wire::ReleaseRequest>>::with<void>,
    // KvReady from the prefill worker: start decoding the request
    caf::replies_to<kv_ready_atom, typed_envelope<wire::KvReady>>::with<void>,
    // -> WorkerStats
    caf::replies_to<stats_atom>::with<typed_envelope<wire::WorkerStats>>,
    // internal: emit the last step's tokens and compute the next step
    caf::reacts_to<step_atom>>;

} // namespace crescent
