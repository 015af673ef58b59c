// Interface of a request actor: one per request, it drives the request's life (schedule,
// reserve decode memory, prefill, decode) and answers the client with the outcome.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using request_actor = caf::typed_actor<
    // RequestSpec -> RequestOutcome, delivered when the request ends, whichever way
    caf::replies_to<run_atom, envelope>::with<envelope>,
    // PrefillDone from the prefill worker: the first token
    caf::replies_to<prefill_done_atom, envelope>::with<void>,
    // TokenBatch from the decode worker
    caf::replies_to<tokens_atom, envelope>::with<void>,
    // RequestFailed from any worker
    caf::replies_to<failed_atom, envelope>::with<void>,
    // internal: the request's deadline passed
    caf::reacts_to<deadline_atom>>;

} // namespace crescent
