// Interface of a request actor: one per request, it drives the request's life (schedule,
// reserve decode memory, prefill, decode) and answers the client with the outcome.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

/// Hears a streamed request's tokens as they come (TokenBatch; the last with final set).
using token_listener =
    caf::typed_actor<caf::reacts_to<tokens_atom, typed_envelope<wire::TokenBatch>>>;

using request_actor = caf::typed_actor<
    // RequestSpec -> RequestOutcome, delivered when the request ends, whichever way
    caf::replies_to<run_atom,
                    typed_envelope<wire::RequestSpec>>::with<typed_envelope<wire::RequestOutcome>>,
    // As run, and each token goes to the listener as it comes: TokenBatch messages (tokens_atom),
    // the prefill's first token included, the last with final set
    // (a token_listener travels as caf::actor, which every process knows how to serialize)
    caf::replies_to<stream_atom, typed_envelope<wire::RequestSpec>,
                    caf::actor>::with<typed_envelope<wire::RequestOutcome>>,
    // From the client that ran it only: it gave up (an HTTP client went away). The request fails
    // at once ("cancelled by the client") and what it holds is released: its decode
    // reservation, and its prefill job, queued or running.
    caf::reacts_to<cancel_atom>,
    // PrefillDone from the prefill worker: the first token
    caf::replies_to<prefill_done_atom, typed_envelope<wire::PrefillDone>>::with<void>,
    // TokenBatch from the decode worker
    caf::replies_to<tokens_atom, typed_envelope<wire::TokenBatch>>::with<void>,
    // RequestFailed from any worker
    caf::replies_to<failed_atom, typed_envelope<wire::RequestFailed>>::with<void>,
    // internal: the request's deadline passed
    caf::reacts_to<deadline_atom>,
    // internal: a retried request that no instance took asks for its placement again
    caf::reacts_to<schedule_atom>,
    // internal: time to see whether its decode instance still sends tokens
    caf::reacts_to<quiet_atom>>;

} // namespace crescent
