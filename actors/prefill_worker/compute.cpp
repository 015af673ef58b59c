// The job loop: one job at a time; its chunks are separate steps so that the mailbox (new jobs,
// stats) is served between them, and so that simulated time can advance by each chunk's cost.
#include "actors/common/code_probe.hpp"
#include "actors/common/next_step.hpp"
#include "actors/common/spawn_placement.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

void schedule_step(prefill_ptr self, uint64_t compute_ns) {
  self->state.current->step_due = true;
  send_next_step(self, self->state.options.simulated_time, compute_ns);
}

void report_to_conductor(prefill_ptr self, const prefill_job& job, bool ok,
                         const stored_blocks& stored) {
  auto& st = self->state;
  auto msg = make_envelope<wire::PrefillReport>([&](wire::PrefillReport::Builder out) {
    out.setRequestId(job.request_id);
    out.setInstance(st.options.instance);
    out.setNode(st.options.node);
    out.setOk(ok);
    out.setComputedTokens(job.computed_tokens);
    out.setReusedTokens(job.reused_tokens);
    out.setComputeNs(job.compute_ns);
    out.setPulledBlocks(job.pulled_blocks);
    out.setPullNs(job.pull_ns);
    out.setPulledFrom(job.pulled_nodes.empty() ? 0 : job.pulled_nodes.front());
    out.setStoreNs(job.store_started_ns == 0 || !ok
                       ? 0
                       : static_cast<uint64_t>(clock_ns(self) - job.store_started_ns));
    write_keys(out.initStoredKeys(static_cast<unsigned>(stored.keys.size())), stored.keys);
    // node_set::words words per key.
    auto nodes = out.initStoredOn(static_cast<unsigned>(stored.nodes.size() * node_set::words));
    for (unsigned i = 0; i < stored.nodes.size(); ++i)
      for (unsigned w = 0; w < node_set::words; ++w)
        nodes.set(i * node_set::words + w, stored.nodes[i].to_words()[w]);
  });
  self->request(st.parts.dir->conductor, control_timeout, report_atom::value, msg)
      .then([] {},
            [](caf::error& err) {
              spdlog::warn("prefill_worker: report not acknowledged: {}", describe(err));
            });
}

void release_pages(prefill_ptr self, prefill_job& job) {
  for (const auto& p : job.pages)
    if (auto err = self->state.parts.kv_pages->free(p))
      spdlog::error("prefill_worker: freeing a KV page failed: {}", describe(err));
  job.pages.clear();
  job.page_ptrs.clear();
}

// Allocates the local pages of the current job; the pool is sized for two of the longest
// prompts and at most two jobs hold pages (the current one and the storing one), so running
// out means a broken invariant.
caf::error allocate_pages(prefill_ptr self, prefill_job& job) {
  auto& pool = *self->state.parts.kv_pages;
  const uint32_t block = self->state.parts.engine->config().block_tokens;
  const auto count = static_cast<uint32_t>((job.tokens.size() + block - 1) / block);
  job.pages = pool.allocate(count);
  if (job.pages.size() != count)
    return make_error(errc::internal, "prefill KV pages exhausted");
  return map_slots(pool, job.pages, job.page_ptrs);
}

// Computes the chunk at job.position: whole, or its next range of layers when the prompt
// streams (the range's KV goes out at the next step, while the range after it computes).
void compute_chunk(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  auto& engine = *st.parts.engine;
  const uint32_t layers = engine.config().layers;
  const auto total = static_cast<uint32_t>(job.tokens.size());
  const uint32_t n = std::min(st.options.chunk_tokens, total - job.position);
  gpu::sequence_ref seq{job.page_ptrs, job.position};
  const auto tokens = std::span{job.tokens}.subspan(job.position, n);
  // A group job computes stage 0's layers here (stage.cpp); the other stages go on from them.
  const uint32_t stage_end = job.grouped ? stage_layers(st, 0).end : layers;
  gpu::layer_range range{0, layers};
  if (job.streaming) {
    range = {job.layer, std::min(stage_end, job.layer + st.options.stream_layers)};
    if (job.layer == 0)
      job.stream.resize((engine.stream_bytes(n) + sizeof(float) - 1) / sizeof(float));
  }
  yield_before_compute(st.options.own_thread);
  auto r = job.streaming ? engine.prefill_layers(seq, tokens, range,
                                                 std::as_writable_bytes(std::span{job.stream}))
                         : engine.prefill(seq, tokens);
  if (!r) {
    fail_job(self, "prefill failed: " + describe(r.error()));
    return;
  }
  job.compute_ns += r->compute_ns;
  st.compute_ns_total += r->compute_ns;
  if (job.streaming) {
    // Pages this chunk completes may go; a page it leaves part-filled goes with the next one.
    const uint32_t block = engine.config().block_tokens;
    job.unsent = range;
    job.unsent_pages_end = job.position + n == total ? static_cast<uint32_t>(job.pages.size())
                                                     : (job.position + n) / block;
    job.layer = range.end;
  }
  if (range.end == stage_end) {
    if (job.grouped)
      job.forward_chunk = job.chunk; // its stream goes to stage 1 at the next step
    job.layer = 0;
    job.position += n;
    job.computed_tokens += n;
    ++job.chunk;
    if (job.position == total) {
      if (!job.grouped)
        job.first_token = r->next_token; // a group's comes from its last stage
      job.computed = true;
    }
  }
  schedule_step(self, r->compute_ns);
}

} // namespace

caf::error map_slots(storage::dram_pool& pool, const std::vector<transport::region_handle>& slots,
                     std::vector<std::byte*>& out) {
  for (const auto& p : slots) {
    auto mem = pool.slot_memory(p);
    if (!mem)
      return std::move(mem.error());
    out.push_back(mem->data());
  }
  return caf::none;
}

void start_next_job(prefill_ptr self) {
  auto& st = self->state;
  while (!st.current && !st.draining && !st.queue.empty() &&
         (st.options.overlap_store || !st.storing)) {
    st.current = std::move(st.queue.front());
    st.queue.pop_front();
    st.current->started_ns = clock_ns(self);
    if (auto err = allocate_pages(self, *st.current)) {
      fail_job(self, describe(err));
      continue;
    }
    lookup_prefix(self);
  }
}

void on_step(prefill_ptr self) {
  auto& st = self->state;
  if (!st.current || !st.current->step_due)
    return; // not the current job's step (a job does not end with one on its way)
  st.current->step_due = false;
  if (end_if_cancelled(self))
    return;
  if (!st.current->streaming) {
    if (st.current->computed)
      hand_off(self);
    else
      compute_chunk(self);
    return;
  }
  const auto id = st.current->request_id;
  if (st.current->computed)
    st.current->computed_ns = clock_ns(self); // the last step's compute has ended
  stream_computed(self);                      // what the last step computed: it may fail the job
  if (!st.current || st.current->request_id != id)
    return;
  if (auto& job = *st.current; job.forward_chunk != UINT32_MAX) {
    forward_stream(self, job.out, id, job.forward_chunk, job.stream);
    job.forward_chunk = UINT32_MAX;
  }
  if (st.current->computed)
    end_streaming(self);
  else
    compute_chunk(self);
}

/// Called by lookup_prefix once the cached prefix is in the local pages.
void begin_compute(prefill_ptr self) {
  if (end_if_cancelled(self))
    return;
  auto& job = *self->state.current;
  const bool grouped = self->state.options.group_instances > 1;
  job.streaming = streams(self->state, job);
  if (job.streaming) {
    const auto id = job.request_id;
    // What did not go out as it loaded (the last page, when the prompt was found whole, does
    // not: its last token is computed again).
    send_cached_prefix(self, job.reused_blocks); // may fail the job
    if (!self->state.current || self->state.current->request_id != id)
      return;
    if (grouped)
      start_stages(self);
  }
  schedule_step(self, 0);
}

void fail_job(prefill_ptr self, const std::string& reason) {
  auto& st = self->state;
  auto& job = *st.current;
  spdlog::warn("prefill_worker {}: request {} failed: {}", st.options.instance, job.request_id,
               reason);
  auto msg = make_envelope<wire::RequestFailed>([&](wire::RequestFailed::Builder out) {
    out.setRequestId(job.request_id);
    out.setReason(reason);
  });
  self->send(job.requester, failed_atom::value, msg); // as itself: the request checks who
  report_to_conductor(self, job, false, {});
  if (job.grouped && abort_stages(self, job)) {
    // Other stages may still write into its pages: they are freed once each has stopped, and
    // asked again after stage_quiet_timeout where an abort or its answer was lost.
    st.draining = std::move(st.current);
    st.current.reset();
    st.draining->stage_watch = false;
    watch_stages(self, *st.draining);
    return;
  }
  release_pages(self, job);
  st.current.reset();
  start_next_job(self);
}

bool streams(const prefill_state& st, const prefill_job& job) {
  // A group's jobs always stream: every stage sends its own layers.
  if (st.options.group_instances > 1 || job.kv_send == wire::KvSend::STREAM)
    return true;
  return job.kv_send == wire::KvSend::CONFIG && job.tokens.size() >= st.options.stream_min_tokens;
}

bool end_if_cancelled(prefill_ptr self) {
  auto& job = *self->state.current;
  if (!job.cancelled)
    return false;
  if (!job.step_due && job.loads_in_flight == 0 && job.batches_in_flight == 0)
    fail_job(self, job.failure.empty() ? "cancelled: its request ended" : job.failure);
  return true;
}

void fail_when_idle(prefill_ptr self, const std::string& reason) {
  auto& job = *self->state.current;
  if (job.loads_in_flight == 0 && !job.step_due) {
    fail_job(self, reason);
    return;
  }
  CRESCENT_PROBE("prefill.fail_waits_for_reads");
  // Reads still land in its pages: freed now, they could be another job's by then. And a step
  // on its way would run the next job's compute before that job's prefix had loaded (chaos seed
  // 91082 of docs/chaos/extreme.budget.yaml on the stream cluster: a one-page prompt, computed
  // whole before it streamed, sent none of its KV and decoded from stale pages).
  spdlog::debug("prefill_worker {}: request {} fails once its reads and its step are in: {}",
                self->state.options.instance, job.request_id, reason);
  if (!job.cancelled || job.failure.empty())
    job.failure = reason;
  job.cancelled = true;
}

// The current job's KV is with decode: it moves to the store slot, where its new blocks are
// stored while the next job loads and computes. With the slot taken, it waits there as the
// current job (so at most two jobs hold pages).
void begin_store(prefill_ptr self) {
  auto& st = self->state;
  if (st.storing) {
    st.current->awaiting_store = true;
    return;
  }
  st.storing = std::move(st.current);
  st.current.reset();
  st.storing->store_started_ns = clock_ns(self);
  store_new_blocks(self);
  start_next_job(self); // unless the options say to wait for the store
}

void finish_store(prefill_ptr self, stored_blocks stored) {
  auto& st = self->state;
  // Blocks read back from a drive are in that node's DRAM again: the conductor's index learns
  // it as it learns of stored ones (else it would still charge their read back).
  auto& back = st.storing->read_back;
  stored.keys.insert(stored.keys.end(), back.keys.begin(), back.keys.end());
  stored.nodes.insert(stored.nodes.end(), back.nodes.begin(), back.nodes.end());
  report_to_conductor(self, *st.storing, true, stored);
  release_pages(self, *st.storing);
  st.storing.reset();
  if (st.current && st.current->awaiting_store) {
    st.current->awaiting_store = false;
    begin_store(self);
    return;
  }
  start_next_job(self);
}

} // namespace crescent
