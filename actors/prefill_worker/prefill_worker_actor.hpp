// Interface of a prefill worker: one per prefill instance. It queues jobs, loads the longest
// cached prefix from the pool, computes the rest in chunks, writes the KV into the decode
// instance's reserved memory, signals the decode worker and stores the new blocks.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/error.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdint>
#include <vector>

namespace crescent {

using prefill_worker_actor = caf::typed_actor<
    // PrefillJob -> PrefillAccepted (queued), or an error (queue full, bad job)
    caf::replies_to<prefill_atom,
                    typed_envelope<wire::PrefillJob>>::with<typed_envelope<wire::PrefillAccepted>>,
    // -> WorkerStats
    caf::replies_to<stats_atom>::with<typed_envelope<wire::WorkerStats>>,
    // ReleaseRequest: the request ended (its client went away); its job, queued or running,
    // ends early and frees what it holds. Taken only from the request actor that sent the job,
    // or from the conductor.
    caf::reacts_to<cancel_atom, typed_envelope<wire::ReleaseRequest>>,
    // StageJob (head of a prefill group -> another of its stages) -> StageAccepted, or an error
    // (not a stage of a group, busy, bad job)
    caf::replies_to<stage_atom,
                    typed_envelope<wire::StageJob>>::with<typed_envelope<wire::StageAccepted>>,
    // StageInbox (stage k -> k - 1), StageChunk (k - 1 -> k), StageDone (stage -> head),
    // StageAbort (head -> stage): each taken only from the instance entitled to send it
    caf::reacts_to<stage_inbox_atom, typed_envelope<wire::StageInbox>>,
    caf::reacts_to<stage_chunk_atom, typed_envelope<wire::StageChunk>>,
    caf::reacts_to<stage_done_atom, typed_envelope<wire::StageDone>>,
    caf::reacts_to<stage_abort_atom, typed_envelope<wire::StageAbort>>,
    // internal: a stage's transfer ended (kind: prefix read, KV batch, stream write; index)
    caf::reacts_to<stage_io_atom, uint64_t, uint32_t, uint32_t, caf::error>,
    // internal: run the next step of the current job
    caf::reacts_to<step_atom>,
    // internal: a group head's job whose own part ended this long ago still waits for a stage
    caf::reacts_to<stage_watch_atom, uint64_t>,
    // internal: batch n of the KV writes of this request's hand-off ended (none: all written)
    caf::reacts_to<handed_off_atom, uint64_t, uint32_t, caf::error>,
    // internal: batch n of the reads of cached blocks into this request's pages ended (one
    // result per read; the modeled time of its reads from other nodes)
    caf::reacts_to<loaded_atom, uint64_t, uint32_t, std::vector<caf::error>, uint64_t>,
    // internal: writes of this request's new blocks into the pool ended (one result per write)
    caf::reacts_to<stored_atom, uint64_t, std::vector<caf::error>>>;

} // namespace crescent
