#include "actors/prefill_worker/prefill_worker.hpp"

#include "actors/common/code_probe.hpp"
#include "actors/common/spawn_placement.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/schema/worker.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace crescent {

namespace {

typed_envelope<wire::WorkerStats> make_stats(prefill_ptr self) {
  auto& st = self->state;
  return make_envelope<wire::WorkerStats>([&](wire::WorkerStats::Builder out) {
    out.setInstance(st.options.instance);
    out.setQueuedJobs(static_cast<uint32_t>(st.queue.size()));
    out.setActiveRequests((st.current ? 1 : 0) + (st.stage ? 1 : 0) + (st.draining ? 1 : 0));
    out.setFreePages(st.parts.kv_pages->capacity_slots() - st.parts.kv_pages->used_slots());
    out.setBadMessages(st.bad.count);
    out.setComputeNs(st.compute_ns_total);
    out.setLoadMisses(st.load_misses_total);
    out.setCodecErrors(st.codec_errors_total);
  });
}

// Invariant of the job loop: while a job runs, one thing continues it, either a step message to
// self, one batch of transfers whose end continues the job (loaded_atom for the cached prefix,
// handed_off_atom for the last KV write to decode, stored_atom for the new blocks), or one
// request (prefix lookup, kv_ready, put) whose answer continues it. While a prompt streams,
// batches of its KV (handed_off_atom) are in flight beside the steps that compute it; the last
// of them to end, after the last step, continues the job.
prefill_worker_actor::behavior_type prefill_worker(prefill_ptr self, prefill_worker_options options,
                                                   prefill_worker_parts parts) {
  lower_compute_thread_priority(options.own_thread);
  self->state.options = options;
  self->state.parts = std::move(parts);
  // Queued jobs of a request that ended (deadline, crash) are dropped unstarted; a running job
  // finishes, and its hand-off fails harmlessly because the decode reservation is revoked.
  if (auto err = make_stream_slots(self))
    spdlog::error("prefill_worker {}: {}", options.instance, describe(err)); // checked at config
  if (auto err = make_staging_slots(self))
    spdlog::error("prefill_worker {}: {}", options.instance, describe(err)); // as spawned
  keep_serving_on_errors(self);
  self->set_down_handler([=](caf::down_msg& down) {
    on_stage_peer_down(self, down.source, down.reason);
    // The decode worker being signalled is gone (a proxy of a lost process may never answer
    // kv_ready): the job ends now (its pages are no longer read), not at the timeout.
    auto& cur = self->state.current;
    if (cur && cur->signalling &&
        self->state.parts.dir->decode[cur->decode_instance].address() == down.source) {
      fail_job(self, "decode instance " + std::to_string(cur->decode_instance) +
                         " stopped: " + caf::to_string(down.reason));
      return;
    }
    // A request that ended (its actor is gone, or its process unreachable) takes no first
    // token: its job stops, queued or running (a job that came after its request ended starts
    // before this down message comes).
    if (cur && cur->requester.address() == down.source && !cur->cancelled && !cur->signalled) {
      CRESCENT_PROBE("prefill.requester_gone");
      cancel_current_job(self);
    }
    auto& q = self->state.queue;
    q.erase(
        std::remove_if(q.begin(), q.end(),
                       [&](const prefill_job& j) { return j.requester.address() == down.source; }),
        q.end());
  });
  return {
      [=](prefill_atom, const typed_envelope<wire::PrefillJob>& msg) {
        return on_prefill_job(self, msg);
      },
      [=](stats_atom) { return make_stats(self); },
      [=](cancel_atom, const typed_envelope<wire::ReleaseRequest>& msg) {
        on_cancel_job(self, msg);
      },
      [=](stage_watch_atom, uint64_t request_id) {
        if (!refuse_unless_self_sent(self, "stage watch"))
          on_stage_watch(self, request_id);
      },
      [=](step_atom) {
        if (refuse_unless_self_sent(self, "step"))
          return;
        if (self->state.stage)
          on_stage_step(self);
        else
          on_step(self);
      },
      [=](stage_atom, const typed_envelope<wire::StageJob>& msg) {
        return on_stage_job(self, msg);
      },
      [=](stage_inbox_atom, const typed_envelope<wire::StageInbox>& msg) {
        on_stage_inbox(self, msg);
      },
      [=](stage_chunk_atom, const typed_envelope<wire::StageChunk>& msg) {
        on_stage_chunk(self, msg);
      },
      [=](stage_done_atom, const typed_envelope<wire::StageDone>& msg) {
        on_stage_done(self, msg);
      },
      [=](stage_abort_atom, const typed_envelope<wire::StageAbort>& msg) {
        on_stage_abort(self, msg);
      },
      [=](stage_io_atom, uint64_t request_id, uint32_t kind, uint32_t index,
          const caf::error& err) { on_stage_io(self, request_id, kind, index, err); },
      [=](handed_off_atom, uint64_t request_id, uint32_t batch, const caf::error& err) {
        on_handed_off(self, request_id, batch, err);
      },
      [=](loaded_atom, uint64_t request_id, uint32_t batch, const std::vector<caf::error>& results,
          uint64_t remote_ns) { on_loaded(self, request_id, batch, results, remote_ns); },
      [=](stored_atom, uint64_t request_id, const std::vector<caf::error>& results) {
        on_stored(self, request_id, results);
      },
  };
}

} // namespace

prefill_worker_actor spawn_prefill_worker(caf::actor_system& sys, prefill_worker_options options,
                                          prefill_worker_parts parts) {
  return spawn_placed(sys, options.own_thread, prefill_worker, options, std::move(parts));
}

} // namespace crescent
