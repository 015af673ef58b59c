#include "actors/decode_worker/decode_worker.hpp"

#include "actors/common/spawn_placement.hpp"
#include "actors/decode_worker/decode_state.hpp"
#include "messages/schema/worker.capnp.h"

#include <caf/stateful_actor.hpp>

namespace crescent {

namespace {

typed_envelope<wire::WorkerStats> make_stats(decode_ptr self) {
  auto& st = self->state;
  return make_envelope<wire::WorkerStats>([&](wire::WorkerStats::Builder out) {
    out.setInstance(st.options.instance);
    out.setQueuedJobs(static_cast<uint32_t>(st.reservations.size() - st.active.size()));
    out.setActiveRequests(static_cast<uint32_t>(st.active.size()));
    out.setFreePages(st.parts.kv_pages->capacity_slots() - st.parts.kv_pages->used_slots());
    out.setBadMessages(st.bad.count);
    out.setComputeNs(st.compute_ns_total);
    out.setCodecErrors(st.codec_errors_total);
  });
}

decode_worker_actor::behavior_type decode_worker(decode_ptr self, decode_worker_options options,
                                                 decode_worker_parts parts) {
  lower_compute_thread_priority(options.own_thread);
  self->state.options = options;
  self->state.parts = std::move(parts);
  keep_serving_on_errors(self);
  self->set_down_handler([=](caf::down_msg& down) {
    std::vector<uint64_t> orphans;
    for (const auto& [id, r] : self->state.reservations)
      if (r.requester.address() == down.source)
        orphans.push_back(id);
    for (auto id : orphans)
      drop_reservation(self, id);
  });
  return {
      [=](reserve_atom, const typed_envelope<wire::ReserveRequest>& msg) {
        return on_reserve(self, msg);
      },
      [=](release_atom, const typed_envelope<wire::ReleaseRequest>& msg) {
        return on_release(self, msg);
      },
      [=](kv_ready_atom, const typed_envelope<wire::KvReady>& msg) {
        return on_kv_ready(self, msg);
      },
      [=](stats_atom) { return make_stats(self); },
      [=](step_atom) {
        if (!refuse_unless_self_sent(self, "step"))
          on_step(self);
      },
  };
}

} // namespace

decode_worker_actor spawn_decode_worker(caf::actor_system& sys, decode_worker_options options,
                                        decode_worker_parts parts) {
  return spawn_placed(sys, options.own_thread, decode_worker, options, std::move(parts));
}

} // namespace crescent
