// Interface of a prefill worker: one per prefill instance. It queues jobs, loads the longest
// cached prefix from the pool, computes the rest in chunks, writes the KV into the decode
// instance's reserved memory, signals the decode worker and stores the new blocks.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope.hpp"

#include <caf/error.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdint>
#include <vector>

namespace crescent {

using prefill_worker_actor = caf::typed_actor<
    // PrefillJob -> PrefillAccepted (queued), or an error (queue full, bad job)
    caf::replies_to<prefill_atom, envelope>::with<envelope>,
    // -> WorkerStats
    caf::replies_to<stats_atom>::with<envelope>,
    // ReleaseRequest: the request ended (its client went away); its job, queued or running,
    // ends early and frees what it holds. Taken only from the request actor that sent the job,
    // or from the conductor.
    caf::reacts_to<cancel_atom, envelope>,
    // StageJob (head of a prefill group -> another of its stages) -> StageAccepted, or an error
    // (not a stage of a group, busy, bad job)
    caf::replies_to<stage_atom, envelope>::with<envelope>,
    // StageInbox (stage k -> k - 1), StageChunk (k - 1 -> k), StageDone (stage -> head),
    // StageAbort (head -> stage): each taken only from the instance entitled to send it
    caf::reacts_to<stage_inbox_atom, envelope>, caf::reacts_to<stage_chunk_atom, envelope>,
    caf::reacts_to<stage_done_atom, envelope>, caf::reacts_to<stage_abort_atom, envelope>,
    // internal: a stage's transfer ended (kind: prefix read, KV batch, stream write; index)
    caf::reacts_to<stage_io_atom, uint64_t, uint32_t, uint32_t, caf::error>,
    // internal: run the next step of the current job
    caf::reacts_to<step_atom>,
    // internal: batch n of the KV writes of this request's hand-off ended (none: all written)
    caf::reacts_to<handed_off_atom, uint64_t, uint32_t, caf::error>,
    // internal: batch n of the reads of cached blocks into this request's pages ended (one
    // result per read; the modeled time of its reads from other nodes)
    caf::reacts_to<loaded_atom, uint64_t, uint32_t, std::vector<caf::error>, uint64_t>,
    // internal: writes of this request's new blocks into the pool ended (one result per write)
    caf::reacts_to<stored_atom, uint64_t, std::vector<caf::error>>>;

} // namespace crescent
