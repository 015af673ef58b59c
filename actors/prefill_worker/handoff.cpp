// The KV hand-off: the prompt's KV goes from the local pages into the pages the decode worker
// reserved (through the transfer engine, never a mailbox), then the request learns its first
// token and the decode worker is signalled. Storing new blocks comes after, off the TTFT path.
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

void notify_request(prefill_ptr self, const prefill_job& job) {
  const uint32_t block = self->state.parts.engine->config().block_tokens;
  auto msg = make_envelope<wire::PrefillDone>([&](wire::PrefillDone::Builder out) {
    out.setRequestId(job.request_id);
    out.setFirstToken(job.first_token);
    out.setComputedTokens(job.computed_tokens);
    out.setReusedTokens(job.reused_blocks * block);
    out.setLoadMisses(job.load_misses);
    out.setComputeNs(job.compute_ns);
  });
  caf::anon_send(job.requester, prefill_done_atom::value, msg);
}

} // namespace

void hand_off(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  for (size_t i = 0; i < job.pages.size(); ++i) {
    // A failed write means the reservation is gone (the request ended, and the decode worker
    // revoked the handles): nothing was written, and the request needs no answer.
    if (auto err = st.parts.transfer->copy(job.pages[i], job.decode_pages[i])) {
      fail_job(self, "KV hand-off to decode failed: " + describe(err));
      return;
    }
  }
  // The request hears of its first token before the decode worker can produce the second, so
  // in one process the request's mailbox sees them in order.
  notify_request(self, job);
  auto msg = make_envelope<wire::KvReady>([&](wire::KvReady::Builder out) {
    out.setRequestId(job.request_id);
    out.setPromptTokens(static_cast<uint32_t>(job.tokens.size()));
    out.setFirstToken(job.first_token);
  });
  const auto id = job.request_id;
  self->request(st.parts.dir->decode[job.decode_instance], control_timeout, kv_ready_atom::value,
                msg)
      .then(
          [=]() {
            if (self->state.current && self->state.current->request_id == id)
              store_new_blocks(self);
          },
          [=](caf::error& err) {
            if (self->state.current && self->state.current->request_id == id)
              fail_job(self, "decode worker refused the KV: " + describe(err));
          });
}

} // namespace crescent
