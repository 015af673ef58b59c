// Interface of a coupled worker: one per coupled instance, the baseline that Crescent's
// disaggregation is measured against (vLLM 0.5 as the Mooncake paper ran it). One engine
// prefills and decodes in a single continuous batch, in the instance's own KV memory, with no
// pool and no transfers (docs/coupled.md).
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace crescent {

using coupled_worker_actor = caf::typed_actor<
    // CoupledJob (from its request actor) -> PrefillAccepted (queued), or an error (queue full:
    // no_space; a prompt the instance can never hold: limit_exceeded; a bad job). The request
    // then hears PrefillDone (the first token), TokenBatch and, if it fails, RequestFailed.
    caf::replies_to<prefill_atom,
                    typed_envelope<wire::CoupledJob>>::with<typed_envelope<wire::PrefillAccepted>>,
    // JobProbe, from the request actor that sent the job (its quiet watch) -> JobProbeReply:
    // whether the job is still here and how many output tokens went to the request
    caf::replies_to<probe_atom,
                    typed_envelope<wire::JobProbe>>::with<typed_envelope<wire::JobProbeReply>>,
    // ReleaseRequest, from the request actor that sent the job only: drop it and its pages
    caf::replies_to<release_atom, typed_envelope<wire::ReleaseRequest>>::with<void>,
    // -> WorkerStats
    caf::replies_to<stats_atom>::with<typed_envelope<wire::WorkerStats>>,
    // internal: emit the last step's tokens and compute the next step
    caf::reacts_to<step_atom>>;

} // namespace crescent
