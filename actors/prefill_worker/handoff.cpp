// The KV hand-off: the prompt's KV goes from the local pages into the pages the decode worker
// reserved (one batch of writes through the transfer engine, never a mailbox: shared memory or
// TCP when the decode worker lives in another process), then the request learns its first
// token and the decode worker is signalled. Storing new blocks comes after, off the TTFT path.
//
// The batch runs while the worker serves its mailbox; its end comes back as handed_off_atom
// (from the engine's thread that ended it, or from this one for in-process copies; in
// simulated time after the batch's modeled time). Jobs queued behind it wait: a batch to a
// process that is gone ends when its connection attempts fail (refused at once; unanswered
// after the engine's connect timeout per attempt), at most at kv_handoff_timeout.
#include "actors/common/modeled_delay.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

void notify_request(const prefill_job& job) {
  auto msg = make_envelope<wire::PrefillDone>([&](wire::PrefillDone::Builder out) {
    out.setRequestId(job.request_id);
    out.setFirstToken(job.first_token);
    out.setComputedTokens(job.computed_tokens);
    out.setReusedTokens(job.reused_tokens);
    out.setRemoteReusedTokens(job.remote_reused_tokens);
    out.setLoadMisses(job.load_misses);
    out.setComputeNs(job.compute_ns);
  });
  caf::anon_send(job.requester, prefill_done_atom::value, msg);
}

// The first failed write's reason, or none.
caf::error first_failure(const std::vector<transport::op_result>& results) {
  for (const auto& r : results)
    if (r.state != transport::op_state::completed)
      return r.reason ? r.reason
                      : make_error(errc::internal, std::string{"a KV write ended "} +
                                                       transport::to_string(r.state));
  return caf::none;
}

void signal_decode(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  // The request hears of its first token before the decode worker can produce the second, so
  // in one process the request's mailbox sees them in order.
  notify_request(job);
  auto msg = make_envelope<wire::KvReady>([&](wire::KvReady::Builder out) {
    out.setRequestId(job.request_id);
    out.setPromptTokens(static_cast<uint32_t>(job.tokens.size()));
    out.setFirstToken(job.first_token);
  });
  const auto id = job.request_id;
  const auto& decode = st.parts.dir->decode[job.decode_instance];
  // Watched while it owes the answer: one that is gone ends the job (see the down handler).
  job.signalling = true;
  self->monitor(decode);
  self->request(decode, control_timeout, kv_ready_atom::value, msg)
      .then(
          [=]() {
            self->demonitor(decode.address());
            if (self->state.current && self->state.current->request_id == id) {
              self->state.current->signalling = false;
              store_new_blocks(self);
            }
          },
          [=](caf::error& err) {
            self->demonitor(decode.address());
            if (self->state.current && self->state.current->request_id == id)
              fail_job(self, "decode worker refused the KV: " + describe(err));
          });
}

} // namespace

void hand_off(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  const uint64_t page = st.parts.engine->page_memory_bytes();
  std::vector<transport::transfer_op> ops;
  ops.reserve(job.pages.size());
  for (size_t i = 0; i < job.pages.size(); ++i)
    ops.push_back({transport::op_kind::write, {job.page_ptrs[i], page}, job.decode_pages[i]});
  auto me = caf::actor_cast<prefill_worker_actor>(self);
  const auto id = job.request_id;
  // The pages are read until the batch ends, which may be after this worker exits (a TCP batch
  // to a peer that is gone retries until its attempts or deadline run out): the callback keeps
  // their memory mapped until then. Not the pool itself: it holds the engine, which holds the
  // batch, and the engine must not end on one of its own threads.
  auto err = st.parts.transfer->submit(ops, transport::clock_type::now() + kv_handoff_timeout,
                                       [me, id, pages = st.parts.kv_pages->memory_keepalive()](
                                           std::vector<transport::op_result> results) {
                                         send_at_batch_end(me, batch_end_ns(results),
                                                           handed_off_atom::value, id,
                                                           first_failure(results));
                                       });
  if (err)
    fail_job(self, "KV hand-off to decode failed: " + describe(err));
}

void on_handed_off(prefill_ptr self, uint64_t request_id, const caf::error& err) {
  auto& st = self->state;
  // Only the engine's callback (an anonymous message) says a hand-off ended.
  if (self->current_sender() != nullptr) {
    st.bad.refuse(st.name,
                  make_error(errc::access_denied, "only the transfer engine ends a KV hand-off"));
    return;
  }
  if (!st.current || st.current->request_id != request_id)
    return; // rare: only the current job hands off, and it waits for this
  // A failed write means the reservation is gone (the request ended, and the decode worker
  // revoked the handles) or the decode worker's process is: the request needs no other answer.
  if (err) {
    fail_job(self, "KV hand-off to decode failed: " + describe(err));
    return;
  }
  signal_decode(self);
}

} // namespace crescent
