// The continuous batch: requests join when their KV arrives and leave after their last token.
#include "actors/common/code_probe.hpp"
#include "actors/common/continuous_batch.hpp"
#include "actors/common/next_step.hpp"
#include "actors/common/spawn_placement.hpp"
#include "actors/decode_worker/decode_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace crescent {

namespace {

void schedule_step(decode_ptr self, uint64_t compute_ns) {
  self->state.stepping = true;
  send_next_step(self, self->state.options.simulated_time, compute_ns);
}

void emit_pending(decode_ptr self) {
  auto& st = self->state;
  auto pending = std::move(st.pending);
  st.pending.clear();
  for (const auto& e : pending) {
    auto i = st.reservations.find(e.request_id);
    if (i == st.reservations.end())
      continue; // released while its token was computed
    send_token_batch(self, i->second.requester, e.request_id, std::span{&e.token, 1}, e.final,
                     e.index);
    if (e.final) {
      st.decoded.insert(e.request_id);
      drop_reservation(self, e.request_id);
    }
  }
}

// With a codec that compresses the hand-off, the prompt's pages hold blocks of ranges of
// layers: each is decoded in place into the engine's layout.
caf::error decode_handoff(decode_ptr self, const reservation& r) {
  auto& st = self->state;
  if (!st.parts.codec)
    return caf::none;
  const auto page_bytes = st.parts.engine->page_memory_bytes();
  st.codec_scratch.resize(page_bytes);
  const uint32_t block = st.parts.engine->config().block_tokens;
  const uint32_t pages = (r.prompt_tokens + block - 1) / block;
  for (uint32_t i = 0; i < pages && i < r.page_ptrs.size(); ++i)
    if (auto err = st.parts.codec->decode_slices({r.page_ptrs[i], page_bytes}, i, st.codec_scratch))
      return make_error(errc::invalid_argument,
                        "page " + std::to_string(i) + " of the hand-off: " + describe(err));
  return caf::none;
}

} // namespace

caf::result<void> on_kv_ready(decode_ptr self, const typed_envelope<wire::KvReady>& msg) {
  auto& st = self->state;
  struct ready {
    uint64_t request_id;
    uint32_t prompt_tokens;
    uint32_t first_token;
  };
  auto a = read_as<wire::KvReady>(msg, [](wire::KvReady::Reader in) {
    return ready{in.getRequestId(), in.getPromptTokens(), in.getFirstToken()};
  });
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  // Only a prefill worker of the cluster says a request's KV is in (it then decodes from it).
  const auto& prefill = st.parts.dir->prefill;
  if (!self->current_sender() ||
      std::none_of(prefill.begin(), prefill.end(), [&](const prefill_worker_actor& p) {
        return p && p.address() == self->current_sender()->address();
      }))
    return st.bad.refuse(
        st.name, make_error(errc::access_denied, "kv_ready comes only from a prefill worker"));
  auto i = st.reservations.find(a->request_id);
  if (i == st.reservations.end() && st.decoded.contains(a->request_id))
    return caf::unit; // a copy, after the decode ran to the end
  if (i == st.reservations.end()) {
    CRESCENT_PROBE("decode.kv_ready_unreserved");
    return make_error(errc::not_found,
                      "no reservation for request " + std::to_string(a->request_id));
  }
  auto& r = i->second;
  // ... and, of them, only the one the request was placed on.
  if (auto err = refuse_unless_sent_by(self, st.parts.dir->prefill[r.prefill_instance].address(),
                                       "kv_ready of request " + std::to_string(a->request_id),
                                       "prefill instance " + std::to_string(r.prefill_instance) +
                                           ", where it was placed"))
    return err;
  // A copy (the prefill worker sends kv_ready again while its answer does not come): the KV
  // is in already, and the copy is answered as the first was; not bad input.
  if (r.active && a->prompt_tokens == r.prompt_tokens)
    return caf::unit;
  if (r.active || a->prompt_tokens != r.prompt_tokens ||
      a->first_token >= st.parts.engine->config().vocab)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "kv_ready does not match the reservation of request " +
                                                 std::to_string(a->request_id)));
  revoke_grants(self, r); // the KV is in; nobody writes these pages from outside any more
  if (auto err = decode_handoff(self, r)) {
    ++st.codec_errors_total;
    // Not KV this worker can use (changed on the way, or another codec's): the prefill fails
    // the request with the reason; the reservation goes with the request's release.
    spdlog::warn("decode_worker {}: the KV of request {} does not decode: {}", st.options.instance,
                 r.request_id, describe(err));
    return err;
  }
  r.active = true;
  r.length = r.prompt_tokens;
  r.next_input = a->first_token;
  r.generated = 1;
  if (r.generated >= r.max_new_tokens) {
    send_token_batch(self, r.requester, r.request_id, {}, true, r.generated);
    st.decoded.insert(a->request_id);
    drop_reservation(self, a->request_id);
    return caf::unit;
  }
  st.active.push_back(a->request_id);
  if (!st.stepping)
    schedule_step(self, 0);
  return caf::unit;
}

void on_step(decode_ptr self) {
  auto& st = self->state;
  st.stepping = false;
  emit_pending(self);
  auto batch = rotating_batch(st.active, st.rotation, st.options.batch_max);
  if (batch.empty())
    return;
  std::vector<gpu::sequence_ref> seqs;
  std::vector<uint32_t> inputs;
  for (auto id : batch) {
    auto& r = st.reservations.at(id);
    seqs.push_back({r.page_ptrs, r.length});
    inputs.push_back(r.next_input);
  }
  yield_before_compute(st.options.own_thread);
  auto out = st.parts.engine->decode(seqs, inputs);
  if (!out) {
    // The engine refused the batch: a broken invariant, not a bad request. Fail the batch's
    // requests with the reason rather than spin on it.
    auto reason = "decode failed: " + describe(out.error());
    for (auto id : batch) {
      auto msg = make_envelope<wire::RequestFailed>([&](wire::RequestFailed::Builder f) {
        f.setRequestId(id);
        f.setReason(reason);
      });
      self->send(st.reservations.at(id).requester, failed_atom::value, msg);
      drop_reservation(self, id);
    }
    schedule_step(self, 0);
    return;
  }
  for (size_t k = 0; k < batch.size(); ++k) {
    auto& r = st.reservations.at(batch[k]);
    r.length += 1;
    r.next_input = out->next_tokens[k];
    r.generated += 1;
    bool final = r.generated >= r.max_new_tokens;
    if (final)
      st.active.erase(std::find(st.active.begin(), st.active.end(), batch[k]));
    st.pending.push_back({batch[k], out->next_tokens[k], final, r.generated - 1});
  }
  st.compute_ns_total += out->compute_ns;
  schedule_step(self, out->compute_ns);
}

} // namespace crescent
