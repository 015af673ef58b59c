// The KV hand-off: the prompt's KV goes from the local pages into the pages the decode worker
// reserved (batches of writes through the transfer engine, never a mailbox: shared memory or TCP
// when the decode worker lives in another process), then the request learns its first token and
// the decode worker is signalled. Storing new blocks comes after, off the TTFT path.
//
// A prompt of at least prefill.stream_min_tokens streams: the cached prefix goes out as it
// loads (its reads come in several batches, and each batch's verified pages go at its end), then
// each range of layers of each chunk as soon as it is computed, while the next range computes (only
// the pages the chunk completed: one it leaves part-filled goes with the next chunk, so that no
// region is written twice by batches in flight together). A shorter prompt sends all of its pages
// in one batch after its last chunk. Either way kv_ready goes out once every batch has ended well;
// the first that fails fails the job.
//
// Batches run while the worker serves its mailbox; each end comes back as handed_off_atom (from
// the engine's thread that ended it, or from this one for in-process copies; in simulated time
// after the batch's modeled time). A batch to a process that is gone ends when its connection
// attempts fail (refused at once; unanswered after the engine's connect timeout per attempt),
// at most at kv_handoff_timeout.
#include "actors/common/ask_again.hpp"
#include "actors/common/code_probe.hpp"
#include "actors/common/modeled_delay.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <cassert>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

void notify_request(prefill_ptr self, const prefill_job& job) {
  auto msg = make_envelope<wire::PrefillDone>([&](wire::PrefillDone::Builder out) {
    out.setRequestId(job.request_id);
    out.setFirstToken(job.first_token);
    out.setComputedTokens(job.computed_tokens);
    out.setReusedTokens(job.reused_tokens);
    out.setRemoteReusedTokens(job.remote_reused_tokens);
    out.setSsdReusedTokens(job.ssd_reused_tokens);
    out.setLoadMisses(job.load_misses);
    out.setComputeNs(job.compute_ns);
    out.setKvTailNs(job.last_end_ns > job.computed_ns
                        ? static_cast<uint64_t>(job.last_end_ns - job.computed_ns)
                        : 0);
    out.setKvBusyNs(job.kv_busy_ns);
    out.setQueueNs(static_cast<uint64_t>(std::max<int64_t>(0, job.started_ns - job.accepted_ns)));
    auto stages = out.initStageComputeNs(static_cast<unsigned>(job.stage_compute_ns.size()));
    for (unsigned k = 0; k < job.stage_compute_ns.size(); ++k)
      stages.set(k, job.stage_compute_ns[k]);
    auto pulled = out.initPulledFrom(static_cast<unsigned>(job.pulled_nodes.size()));
    for (unsigned k = 0; k < job.pulled_nodes.size(); ++k)
      pulled.set(k, job.pulled_nodes[k]);
  });
  self->send(job.requester, prefill_done_atom::value, msg); // as itself: the request checks who
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
  notify_request(self, job);
  auto msg = make_envelope<wire::KvReady>([&](wire::KvReady::Builder out) {
    out.setRequestId(job.request_id);
    out.setPromptTokens(static_cast<uint32_t>(job.tokens.size()));
    out.setFirstToken(job.first_token);
  });
  const auto id = job.request_id;
  const auto& decode = st.parts.dir->decode[job.decode_instance];
  // Watched while it owes the answer: one that is gone ends the job (see the down handler).
  job.signalling = true;
  job.signalled = true;
  self->monitor(decode);
  // Sent again while unanswered: the decode worker answers a copy as the first.
  auto wanted = [=] { return self->state.current && self->state.current->request_id == id; };
  ask_again(
      self, decode, kv_ready_atom::value, msg, wanted,
      [=]() {
        self->demonitor(decode.address());
        if (self->state.current && self->state.current->request_id == id) {
          self->state.current->signalling = false;
          begin_store(self);
        }
      },
      [=](caf::error& err) {
        self->demonitor(decode.address());
        if (self->state.current && self->state.current->request_id == id)
          fail_job(self, "decode worker refused the KV: " + describe(err));
      });
}

// Submits the writes of layers r of local pages [first, end) into their decode pages, as one
// batch; fails the job if the engine refuses it.
void submit_pages(prefill_ptr self, uint32_t first, uint32_t end, gpu::layer_range r) {
  auto& st = self->state;
  auto& job = *st.current;
  assert(first < end && end <= job.pages.size());
  std::vector<transport::transfer_op> ops;
  ops.reserve(end - first);
  // Checked end to end (an xxh3 of each slice at the decode side): KV that changed on the way
  // would decode other tokens, silently (crescent chaos, corrupt faults); a slice that fails its
  // check fails the hand-off and the request, with the reason.
  const auto prompt = static_cast<uint32_t>(job.tokens.size());
  for (uint32_t i = first; i < end; ++i) {
    auto op =
        kv_write(self, job.page_ptrs[i], st.staging_ptrs.empty() ? nullptr : st.staging_ptrs[i],
                 job.decode_pages[i], r, i, prompt);
    if (!op) {
      fail_when_idle(self, "KV hand-off to decode failed: " + describe(op.error()));
      return;
    }
    ops.push_back(*op);
  }
  auto me = caf::actor_cast<caf::actor_addr>(self); // weak: see send_at_batch_end
  const auto id = job.request_id;
  const auto batch = static_cast<uint32_t>(job.batch_submitted_ns.size());
  job.batch_submitted_ns.push_back(clock_ns(self));
  ++job.batches_in_flight;
  // The pages are read until the batch ends, which may be after this worker exits (a TCP batch
  // to a peer that is gone retries until its attempts or deadline run out): the callback keeps
  // their memory mapped until then. Not the pool itself: it holds the engine, which holds the
  // batch, and the engine must not end on one of its own threads.
  auto err = st.parts.transfer->submit(
      ops, transport::clock_type::now() + kv_handoff_timeout,
      [me, id, batch,
       pages = st.parts.kv_pages->memory_keepalive()](std::vector<transport::op_result> results) {
        send_at_batch_end<prefill_worker_actor>(me, batch_end_ns(results), handed_off_atom::value,
                                                id, batch, first_failure(results));
      });
  if (err)
    fail_when_idle(self, "KV hand-off to decode failed: " + describe(err));
}

// Every batch is submitted: kv_ready once the last has ended.
void all_submitted(prefill_ptr self) {
  auto& job = *self->state.current;
  job.all_sent = true;
  signal_decode_when_ready(self);
}

// The queued prefix, a bounded batch at a time while the job has room in its window. A prompt
// found (almost) whole would otherwise put its whole prefix before the decode instance's link
// at once, and every other prompt's KV to that instance would wait behind all of it (the modeled
// links are FIFO); in batches, another prompt's last layers wait for two of this one's at most.
void send_queued_prefix(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  const auto id = job.request_id;
  const uint64_t pages_max = prefix_batch_pages_max(st);
  while (job.prefix_next < job.prefix_end && job.batches_in_flight < prefill_handoff_window &&
         !job.cancelled) {
    const uint32_t first = job.prefix_next;
    const auto end = static_cast<uint32_t>(std::min<uint64_t>(job.prefix_end, first + pages_max));
    job.prefix_next = end;
    submit_pages(self, first, end, {0, st.parts.engine->config().layers});
    if (!st.current || st.current->request_id != id)
      return;
  }
}

} // namespace

caf::error make_staging_slots(prefill_ptr self) {
  auto& st = self->state;
  if (!st.parts.staging)
    return caf::none;
  const auto& m = st.parts.engine->config();
  st.staging_pages = (m.context_tokens_max + m.block_tokens - 1) / m.block_tokens;
  if (!st.parts.codec || st.parts.staging->capacity_slots() != 2 * st.staging_pages ||
      st.parts.staging->slot_bytes() < st.parts.engine->page_memory_bytes())
    return make_error(errc::bad_config, "the hand-off's staging memory is too small, or there is "
                                        "no codec to encode with");
  st.staging_slots = st.parts.staging->allocate(2 * st.staging_pages);
  return map_slots(*st.parts.staging, st.staging_slots, st.staging_ptrs);
}

caf::expected<transport::transfer_op> kv_write(prefill_ptr self, std::byte* page,
                                               std::byte* staging,
                                               const transport::region_handle& remote,
                                               gpu::layer_range r, uint32_t index,
                                               uint32_t prompt_tokens) {
  const auto& st = self->state;
  const auto slice = st.parts.engine->layer_slice(r);
  const auto& codec = st.parts.codec;
  if (codec && staging != nullptr) {
    const auto [tokens, last] =
        extent_of(index, prompt_tokens, st.parts.engine->config().block_tokens);
    // 0: the range is too small to encode (modeled stand-ins only); it goes as it is.
    if (const size_t n = codec->slice_bytes(r.first, r.count(), index, tokens, last); n > 0) {
      const std::span<std::byte> out{staging + slice.offset, slice.length};
      auto k = codec->encode_slice({page, st.parts.engine->page_memory_bytes()}, r.first, r.count(),
                                   index, tokens, last, out);
      if (!k)
        return std::move(k.error());
      return transport::transfer_op{transport::op_kind::write, out.first(*k),
                                    remote.slice(slice.offset, *k), 0, true};
    }
  }
  return transport::transfer_op{transport::op_kind::write,
                                {page + slice.offset, slice.length},
                                remote.slice(slice.offset, slice.length),
                                0,
                                true};
}

void hand_off(prefill_ptr self) {
  auto& job = *self->state.current;
  const auto id = job.request_id;
  job.computed_ns = clock_ns(self); // before the batch: an in-process copy runs in submit
  submit_pages(self, 0, static_cast<uint32_t>(job.pages.size()),
               {0, self->state.parts.engine->config().layers});
  if (self->state.current && self->state.current->request_id == id)
    all_submitted(self);
}

void send_cached_prefix(prefill_ptr self, uint32_t verified) {
  auto& job = *self->state.current;
  const auto& cfg = self->state.parts.engine->config();
  // Whole pages, all of their layers, before the page of the prompt's last token (computed
  // again over its reused KV when the prompt was found whole).
  const auto prompt = static_cast<uint32_t>(job.tokens.size());
  const uint32_t end = std::min(verified, prompt == 0 ? 0 : (prompt - 1) / cfg.block_tokens);
  if (end <= job.pages_sent)
    return;
  assert(job.prefix_end == job.pages_sent); // the prefix is queued before any computed KV
  job.pages_sent = end;                     // queued: the computed KV's pages come after
  job.prefix_end = end;
  send_queued_prefix(self);
}

void stream_computed(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  const uint32_t stage_end =
      job.grouped ? stage_layers(st, 0).end : st.parts.engine->config().layers;
  const auto kv = take_unsent(job, stage_end);
  if (!kv.empty())
    submit_pages(self, kv.first, kv.end, kv.range);
}

void end_streaming(prefill_ptr self) {
  all_submitted(self);
}

void on_handed_off(prefill_ptr self, uint64_t request_id, uint32_t batch, const caf::error& err) {
  auto& st = self->state;
  // Only the engine's callback (an anonymous message) says a hand-off ended.
  if (self->current_sender() != nullptr) {
    st.bad.refuse(st.name,
                  make_error(errc::access_denied, "only the transfer engine ends a KV hand-off"));
    return;
  }
  if (!st.current || st.current->request_id != request_id)
    return; // a batch of a job that failed before it ended
  auto& job = *st.current;
  if (batch >= job.batch_submitted_ns.size() || job.batches_in_flight == 0)
    return; // rare: not a batch of this job's (the engine answers each once)
  --job.batches_in_flight;
  // The time some batch was in flight, and when the last ended: the tail after compute.
  const int64_t end = clock_ns(self);
  const int64_t start = std::max(job.batch_submitted_ns[batch], job.last_end_ns);
  if (end > start)
    job.kv_busy_ns += static_cast<uint64_t>(end - start);
  job.last_end_ns = std::max(job.last_end_ns, end);
  // A failed write means the reservation is gone (the request ended, and the decode worker
  // revoked the handles) or the decode worker's process is: the request needs no other answer.
  if (err) {
    CRESCENT_PROBE("prefill.handoff_failed");
    fail_when_idle(self, "KV hand-off to decode failed: " + describe(err));
    return;
  }
  send_queued_prefix(self); // the window has room again: may fail the job
  if (!st.current || st.current->request_id != request_id)
    return;
  signal_decode_when_ready(self);
}

void signal_decode_when_ready(prefill_ptr self) {
  if (end_if_cancelled(self))
    return;
  auto& job = *self->state.current;
  if (!job.all_sent || job.batches_in_flight > 0 || job.prefix_next < job.prefix_end ||
      job.signalled)
    return;
  if (job.grouped) {
    if (!stages_finished(job)) {
      watch_stages(self, job); // the other stages' KV is still coming
      return;
    }
    // A group's compute is its pipeline's: from its first chunk to the end of its last stage's
    // compute (its KV's tail after that is the hand-off's, as for one instance).
    job.stage_compute_ns[0] = job.compute_ns; // its own, summed chunk by chunk
    const auto elapsed = static_cast<uint64_t>(clock_ns(self) - job.compute_started_ns);
    job.compute_ns = elapsed - std::min(elapsed, job.last_stage_tail_ns);
    job.computed_ns = clock_ns(self) - static_cast<int64_t>(elapsed - job.compute_ns);
    job.last_end_ns = std::max(job.last_end_ns, clock_ns(self));
  }
  signal_decode(self);
}

} // namespace crescent
