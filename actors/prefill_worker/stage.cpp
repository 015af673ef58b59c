// Chunked pipeline parallelism (CPP, docs/prefill.md). A prefill group of X consecutive
// instances shares the model's layers: stage k holds [k L/X, (k+1) L/X). The head (stage 0)
// takes the group's jobs, loads the cached prefix into its pages and asks every other stage for
// its part (StageJob). Each stage reads its layers of the prefix from the head's pages, then
// computes chunk after chunk: stage 0 from the tokens, stage k from the stream that stage k - 1
// wrote into its inbox (registered memory, through the transfer engine; a StageChunk says it
// landed). Every stage streams its layers' KV of each chunk to the decode pages, and the other
// stages into the head's pages too, so that the head stores whole blocks after. A stage says
// StageDone once all of its transfers have ended; the head signals decode once every stage has
// (the first token comes from the last stage).
//
// One group job runs at a time. A job that fails at the head while other stages run is held
// (its pages still written by them) until each has answered a StageAbort; a stage or a head that
// stops ends the job (monitors). Messages between stages are taken only from the instance
// entitled to send them: the head, the stage before, the stage after.
#include "actors/common/code_probe.hpp"
#include "actors/common/modeled_delay.hpp"
#include "actors/common/next_step.hpp"
#include "actors/common/spawn_placement.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/worker.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <tuple>

namespace crescent {

namespace {

constexpr uint32_t io_prefix = 0; // a stage read its layers of the cached prefix
constexpr uint32_t io_kv = 1;     // a batch of a stage's KV writes ended
constexpr uint32_t io_stream = 2; // a chunk's stream reached the next stage's inbox

bool sent_by(prefill_ptr self, uint32_t instance) {
  const auto& dir = *self->state.parts.dir;
  return instance < dir.prefill.size() && self->current_sender() != nullptr &&
         self->current_sender()->address() == dir.prefill[instance].address();
}

caf::error denied(const char* what) {
  return make_error(errc::access_denied, what);
}

uint32_t group_size(const prefill_state& st) {
  return st.options.group_instances;
}

uint32_t chunk_count(uint32_t total, uint32_t cached, uint32_t chunk_tokens) {
  return (total - cached + chunk_tokens - 1) / chunk_tokens;
}

std::span<std::byte> inbox_slot(prefill_state& st, uint32_t chunk) {
  return {st.stream_ptrs[chunk], st.parts.streams->slot_bytes()};
}

std::span<std::byte> outbox_slot(prefill_state& st, uint32_t chunk) {
  return {st.stream_ptrs[st.chunks_max + chunk], st.parts.streams->slot_bytes()};
}

template <class Fn>
void submit_io(prefill_ptr self, uint64_t request_id, uint32_t kind, uint32_t index,
               const std::vector<transport::transfer_op>& ops, Fn on_refused) {
  auto& st = self->state;
  auto me = caf::actor_cast<caf::actor_addr>(self); // weak: see send_at_batch_end
  // The memory is read or written until the batch ends, which may be after this worker exits.
  auto err = st.parts.transfer->submit(
      ops, transport::clock_type::now() + kv_handoff_timeout,
      [me, request_id, kind, index, pages = st.parts.kv_pages->memory_keepalive(),
       streams = st.parts.streams->memory_keepalive()](std::vector<transport::op_result> results) {
        caf::error failed;
        for (const auto& r : results)
          if (r.state != transport::op_state::completed) {
            failed = r.reason ? r.reason
                              : make_error(errc::internal, std::string{"a stage transfer ended "} +
                                                               transport::to_string(r.state));
            break;
          }
        send_at_batch_end<prefill_worker_actor>(me, batch_end_ns(results), stage_io_atom::value,
                                                request_id, kind, index, failed);
      });
  if (err)
    on_refused(std::move(err));
}

// -- the stage's side (not the head) -------------------------------------------------------

void send_done(prefill_ptr self, stage_job& job) {
  auto& st = self->state;
  const bool ok = !job.failure;
  auto msg = make_envelope<wire::StageDone>([&](wire::StageDone::Builder out) {
    out.setRequestId(job.request_id);
    out.setStage(stage_index(st));
    out.setOk(ok);
    out.setReason(ok ? "" : describe(job.failure));
    out.setFirstToken(job.first_token);
    out.setComputeNs(job.compute_ns);
    out.setTailNs(job.computed_ns == 0 ? 0
                                       : static_cast<uint64_t>(clock_ns(self) - job.computed_ns));
  });
  self->send(st.parts.dir->prefill[group_head(st)], stage_done_atom::value, msg);
}

// Ends the stage job once nothing it started is still running: its pages are free then.
void finish_if_quiet(prefill_ptr self) {
  auto& st = self->state;
  if (!st.stage)
    return;
  auto& job = *st.stage;
  const bool all_done = job.failure || (job.chunk == job.chunks && job.out.waiting.empty());
  if (!all_done || job.stepping || job.in_flight > 0 || job.out.in_flight > 0)
    return;
  if (job.failure)
    spdlog::warn("prefill_worker {}: stage of request {} ended: {}", st.options.instance,
                 job.request_id, describe(job.failure));
  send_done(self, job);
  self->demonitor(st.parts.dir->prefill[group_head(st)].address());
  for (const auto& p : job.pages)
    if (auto err = st.parts.kv_pages->free(p))
      spdlog::error("prefill_worker: freeing a KV page failed: {}", describe(err));
  st.stage.reset();
}

void fail_stage(prefill_ptr self, caf::error reason) {
  auto& job = *self->state.stage;
  if (!job.failure)
    job.failure = std::move(reason);
  finish_if_quiet(self);
}

void submit_stage_kv(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.stage;
  const auto kv = take_unsent(job, stage_layers(st, stage_index(st)).end);
  if (kv.empty())
    return;
  const auto [range, first, end] = std::tuple{kv.range, kv.first, kv.end};
  const auto slice = st.parts.engine->layer_slice(range);
  std::vector<transport::transfer_op> ops;
  ops.reserve(2 * (end - first));
  const auto prompt = static_cast<uint32_t>(job.tokens.size());
  for (uint32_t i = first; i < end; ++i) {
    const std::span<std::byte> local{job.page_ptrs[i] + slice.offset, slice.length};
    // To decode as the hand-off goes (handoff.cpp: compressed where the codec says so, checked
    // end to end); to the head as it is, for the pool.
    auto op = kv_write(self, job.page_ptrs[i],
                       st.staging_ptrs.empty() ? nullptr : st.staging_ptrs[st.staging_pages + i],
                       job.decode_pages[i], range, i, prompt);
    if (!op) {
      fail_stage(self, make_error(errc::internal, "KV of a stage: " + describe(op.error())));
      return;
    }
    ops.push_back(*op);
    ops.push_back({transport::op_kind::write, local,
                   job.head_pages[i].slice(slice.offset, slice.length), 0, true});
  }
  ++job.in_flight;
  submit_io(self, job.request_id, io_kv, 0, ops, [&](caf::error err) {
    --job.in_flight;
    job.failure = make_error(errc::internal, "KV of a stage refused: " + describe(err));
  });
}

// Computes the next range of layers of the current chunk, when its stream is here.
void compute_stage(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.stage;
  if (job.failure || job.stepping || !job.loaded || job.chunk == job.chunks ||
      !job.arrived[job.chunk])
    return;
  auto& engine = *st.parts.engine;
  const auto layers = stage_layers(st, stage_index(st));
  const auto total = static_cast<uint32_t>(job.tokens.size());
  const uint32_t n = std::min(st.options.chunk_tokens, total - job.position);
  if (job.layer == layers.first) {
    const size_t bytes = engine.stream_bytes(n);
    job.stream.assign((bytes + sizeof(float) - 1) / sizeof(float), 0.0f);
    std::memcpy(job.stream.data(), inbox_slot(st, job.chunk).data(), bytes);
  }
  const gpu::layer_range range{job.layer,
                               std::min(layers.end, job.layer + st.options.stream_layers)};
  gpu::sequence_ref seq{job.page_ptrs, job.position};
  yield_before_compute(st.options.own_thread);
  auto r = engine.prefill_layers(seq, std::span{job.tokens}.subspan(job.position, n), range,
                                 std::as_writable_bytes(std::span{job.stream}));
  if (!r) {
    fail_stage(self, make_error(errc::internal, "stage prefill failed: " + describe(r.error())));
    return;
  }
  job.compute_ns += r->compute_ns;
  st.compute_ns_total += r->compute_ns;
  const uint32_t block = engine.config().block_tokens;
  job.unsent = range;
  job.unsent_pages_end = job.position + n == total ? static_cast<uint32_t>(job.pages.size())
                                                   : (job.position + n) / block;
  job.layer = range.end;
  if (range.end == engine.config().layers && job.position + n == total)
    job.first_token = r->next_token;
  job.stepping = true;
  send_next_step(self, st.options.simulated_time, r->compute_ns);
}

caf::expected<stage_job> decode_stage_job(const typed_envelope<wire::StageJob>& msg,
                                          const prefill_state& st) {
  const auto& model = st.parts.engine->config();
  return read_as<wire::StageJob>(msg, [&](wire::StageJob::Reader in) -> caf::expected<stage_job> {
    const auto tokens = in.getTokens();
    if (tokens.size() == 0 || tokens.size() > model.context_tokens_max)
      return make_error(errc::limit_exceeded, "a stage job's prompt of " +
                                                  std::to_string(tokens.size()) +
                                                  " tokens is outside the model's context");
    const size_t pages = (tokens.size() + model.block_tokens - 1) / model.block_tokens;
    if (in.getHeadPages().size() != pages || in.getDecodePages().size() != pages)
      return make_error(errc::invalid_argument, "a stage job needs one head page and one decode "
                                                "page per block of its prompt");
    if (in.getCachedTokens() >= tokens.size())
      return make_error(errc::invalid_argument, "a stage job must compute at least one token");
    stage_job job;
    job.request_id = in.getRequestId();
    job.tokens = to_vector(tokens);
    job.cached_tokens = in.getCachedTokens();
    job.decode_instance = in.getDecodeInstance();
    for (auto p : in.getHeadPages())
      job.head_pages.push_back(transport::from_wire(p));
    for (auto p : in.getDecodePages())
      job.decode_pages.push_back(transport::from_wire(p));
    return job;
  });
}

caf::error check_stage_job(const stage_job& job, const prefill_state& st) {
  if (auto err = check_prompt(st, job.tokens, job.decode_instance, job.head_pages))
    return err;
  if (auto err = check_prompt(st, job.tokens, job.decode_instance, job.decode_pages))
    return err;
  if (chunk_count(static_cast<uint32_t>(job.tokens.size()), job.cached_tokens,
                  st.options.chunk_tokens) > st.chunks_max)
    return make_error(errc::limit_exceeded, "a stage job of more chunks than the inbox holds");
  return caf::none;
}

// Tells the stage before where this job's streams go.
void send_inbox(prefill_ptr self, const stage_job& job) {
  auto& st = self->state;
  auto msg = make_envelope<wire::StageInbox>([&](wire::StageInbox::Builder out) {
    out.setRequestId(job.request_id);
    auto slots = out.initSlots(job.chunks);
    for (uint32_t c = 0; c < job.chunks; ++c)
      transport::to_wire(st.stream_slots[c], slots[c]);
  });
  self->send(st.parts.dir->prefill[st.options.instance - 1], stage_inbox_atom::value, msg);
}

// Reads this stage's layers of the cached prefix from the head's pages (the page it ends in
// too: the rest of that page is computed here).
void read_prefix(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.stage;
  const uint32_t block = st.parts.engine->config().block_tokens;
  const uint32_t pages = (job.cached_tokens + block - 1) / block;
  if (pages == 0) {
    job.loaded = true;
    return;
  }
  const auto slice = st.parts.engine->layer_slice(stage_layers(st, stage_index(st)));
  std::vector<transport::transfer_op> ops;
  for (uint32_t i = 0; i < pages; ++i)
    ops.push_back({transport::op_kind::read,
                   {job.page_ptrs[i] + slice.offset, slice.length},
                   job.head_pages[i].slice(slice.offset, slice.length),
                   0,
                   true});
  ++job.in_flight;
  submit_io(self, job.request_id, io_prefix, 0, ops, [&](caf::error err) {
    --job.in_flight;
    job.failure = make_error(errc::internal, "reading the prefix refused: " + describe(err));
  });
}

// -- the head's side -------------------------------------------------------------------------

prefill_job* head_job(prefill_state& st, uint64_t request_id) {
  if (st.current && st.current->grouped && st.current->request_id == request_id)
    return &*st.current;
  if (st.draining && st.draining->request_id == request_id)
    return &*st.draining;
  return nullptr;
}

// A drained job is freed once no stage writes into its pages and no stream of it is in flight.
void finish_draining(prefill_ptr self) {
  auto& st = self->state;
  if (!st.draining || st.draining->out.in_flight > 0)
    return;
  for (auto s : st.draining->stage_state)
    if (s == stage_waiting)
      return;
  for (const auto& p : st.draining->pages)
    if (auto err = st.parts.kv_pages->free(p))
      spdlog::error("prefill_worker: freeing a KV page failed: {}", describe(err));
  st.draining.reset();
  start_next_job(self);
}

// Stage k of the head's job has ended, well or not.
void end_stage(prefill_ptr self, prefill_job& job, uint32_t k, bool ok, const std::string& why) {
  auto& st = self->state;
  if (k >= job.stage_state.size() || job.stage_state[k] != stage_waiting)
    return;
  job.stage_state[k] = ok ? stage_ok : stage_ended;
  self->demonitor(st.parts.dir->prefill[group_head(st) + k].address());
  if (st.draining && &job == &*st.draining) {
    finish_draining(self);
    return;
  }
  if (!ok) {
    CRESCENT_PROBE("prefill.stage_failed");
    fail_when_idle(self, "prefill stage " + std::to_string(k) + " failed: " + why);
    return;
  }
  signal_decode_when_ready(self);
}

} // namespace

uint32_t stage_index(const prefill_state& st) {
  return st.options.instance % group_size(st);
}

uint32_t group_head(const prefill_state& st) {
  return st.options.instance - stage_index(st);
}

gpu::layer_range stage_layers(const prefill_state& st, uint32_t stage) {
  const uint32_t layers = st.parts.engine->config().layers;
  const uint32_t x = group_size(st);
  return {stage * layers / x, (stage + 1) * layers / x};
}

caf::error make_stream_slots(prefill_ptr self) {
  auto& st = self->state;
  if (group_size(st) <= 1)
    return caf::none;
  if (!st.parts.streams)
    return make_error(errc::bad_config, "a prefill group needs stream memory");
  const auto& model = st.parts.engine->config();
  st.chunks_max =
      (model.context_tokens_max + st.options.chunk_tokens - 1) / st.options.chunk_tokens;
  if (st.parts.streams->capacity_slots() != 2 * st.chunks_max ||
      st.parts.streams->slot_bytes() < st.parts.engine->stream_bytes(st.options.chunk_tokens))
    return make_error(errc::bad_config, "the stream memory of a prefill group is too small");
  st.stream_slots = st.parts.streams->allocate(2 * st.chunks_max);
  return map_slots(*st.parts.streams, st.stream_slots, st.stream_ptrs);
}

namespace {

void send_stage_abort(prefill_ptr self, const prefill_worker_actor& stage, uint64_t request_id) {
  auto msg = make_envelope<wire::StageAbort>(
      [&](wire::StageAbort::Builder out) { out.setRequestId(request_id); });
  self->send(stage, stage_abort_atom::value, msg);
}

} // namespace

void start_stages(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  const uint32_t x = group_size(st);
  job.grouped = true;
  job.compute_started_ns = clock_ns(self);
  job.stage_state.assign(x, stage_waiting);
  job.stage_compute_ns.assign(x, 0);
  job.stage_state[0] = stage_ok; // this one: the job itself
  auto msg = make_envelope<wire::StageJob>([&](wire::StageJob::Builder out) {
    out.setRequestId(job.request_id);
    auto tokens = out.initTokens(static_cast<unsigned>(job.tokens.size()));
    for (unsigned i = 0; i < job.tokens.size(); ++i)
      tokens.set(i, job.tokens[i]);
    out.setCachedTokens(job.position);
    auto head = out.initHeadPages(static_cast<unsigned>(job.pages.size()));
    for (unsigned i = 0; i < job.pages.size(); ++i)
      transport::to_wire(job.pages[i], head[i]);
    out.setDecodeInstance(job.decode_instance);
    auto decode = out.initDecodePages(static_cast<unsigned>(job.decode_pages.size()));
    for (unsigned i = 0; i < job.decode_pages.size(); ++i)
      transport::to_wire(job.decode_pages[i], decode[i]);
  });
  const auto id = job.request_id;
  for (uint32_t k = 1; k < x; ++k) {
    const auto& stage = st.parts.dir->prefill[st.options.instance + k];
    self->monitor(stage);
    self->request(stage, control_timeout, stage_atom::value, msg)
        .then([](const typed_envelope<wire::StageAccepted>&) {},
              [=](caf::error& err) {
                // A copy that came after the job, whose answer was lost: the stage has it.
                if (is(err, errc::already_exists))
                  return;
                // Unanswered: the stage may run it all the same; told to stop, it says nothing
                // back that the head still waits for (it stops on its own if this is lost).
                if (err == caf::sec::request_timeout)
                  send_stage_abort(self, stage, id);
                if (auto* j = head_job(self->state, id))
                  end_stage(self, *j, k, false, "refused the job: " + describe(err));
              });
  }
}

void forward_stream(prefill_ptr self, stream_out& out, uint64_t request_id, uint32_t chunk,
                    std::span<const float> stream) {
  auto& st = self->state;
  const auto bytes = std::as_bytes(stream);
  assert(bytes.size() <= st.parts.streams->slot_bytes());
  std::memcpy(outbox_slot(st, chunk).data(), bytes.data(), bytes.size());
  out.waiting.push_back(chunk);
  if (out.inbox.empty())
    return; // written once the next stage says where
  for (auto c : out.waiting) {
    if (c >= out.inbox.size())
      continue; // the inbox message was checked for its length: not reached
    const std::vector<transport::transfer_op> ops{
        {transport::op_kind::write, outbox_slot(st, c).first(bytes.size()), out.inbox[c], 0, true}};
    ++out.in_flight;
    submit_io(self, request_id, io_stream, c, ops, [&](caf::error err) {
      --out.in_flight;
      spdlog::warn("prefill_worker {}: a stream write was refused: {}", st.options.instance,
                   describe(err));
    });
  }
  out.waiting.clear();
}

bool stages_finished(const prefill_job& job) {
  return std::all_of(job.stage_state.begin(), job.stage_state.end(),
                     [](uint8_t s) { return s == stage_ok; });
}

void watch_stages(prefill_ptr self, prefill_job& job) {
  if (job.stage_watch)
    return;
  job.stage_watch = true;
  self->delayed_send(self, stage_quiet_timeout, stage_watch_atom::value, job.request_id);
}

namespace {

void arm_stage_job_watch(prefill_ptr self, stage_job& job, std::chrono::nanoseconds after) {
  if (job.watch)
    return;
  job.watch = true;
  self->delayed_send(self, after, stage_watch_atom::value, job.request_id);
}

// A stage heard of its job: its quiet watch starts again from now.
void heard_of_stage_job(prefill_ptr self, stage_job& job) {
  job.heard_ns = clock_ns(self);
  arm_stage_job_watch(self, job, stage_job_quiet_timeout);
}

void on_stage_job_watch(prefill_ptr self) {
  auto& job = *self->state.stage;
  job.watch = false;
  if (job.failure || job.chunk == job.chunks)
    return; // ending: what it sends ends by its own timeouts
  const auto quiet = std::chrono::nanoseconds(clock_ns(self) - job.heard_ns);
  if (quiet < stage_job_quiet_timeout) {
    arm_stage_job_watch(self, job, stage_job_quiet_timeout - quiet);
    return;
  }
  fail_stage(self,
             make_error(errc::timeout, "heard nothing of the job for " +
                                           std::to_string(stage_job_quiet_timeout.count()) + " s"));
}

} // namespace

void on_stage_watch(prefill_ptr self, uint64_t request_id) {
  auto& st = self->state;
  if (st.stage && st.stage->request_id == request_id) {
    on_stage_job_watch(self);
    return;
  }
  if (st.draining && st.draining->request_id == request_id) {
    // A stage that has not answered its StageAbort by now lost it, or lost its answer (the
    // StageDone): it is asked again. Each answers whether it still runs the job or not; one that
    // stopped ends by its monitor. Until each has answered, the job's pages stay held.
    auto& job = *st.draining;
    job.stage_watch = false;
    if (abort_stages(self, job))
      watch_stages(self, job);
    return;
  }
  if (!st.current || st.current->request_id != request_id || st.current->cancelled)
    return; // ended, or failing already
  const auto& job = *st.current;
  for (uint32_t k = 1; k < job.stage_state.size(); ++k)
    if (job.stage_state[k] == stage_waiting) {
      // Its abort is answered whether it still runs the job or not (on_stage_abort).
      fail_when_idle(self, "prefill stage " + std::to_string(k) + " said nothing of its end " +
                               std::to_string(stage_quiet_timeout.count()) + " s after the head's");
      return;
    }
}

bool abort_stages(prefill_ptr self, const prefill_job& job) {
  auto& st = self->state;
  bool running = job.out.in_flight > 0;
  for (uint32_t k = 1; k < job.stage_state.size(); ++k) {
    if (job.stage_state[k] != stage_waiting)
      continue;
    running = true;
    send_stage_abort(self, st.parts.dir->prefill[group_head(st) + k], job.request_id);
  }
  return running;
}

caf::result<typed_envelope<wire::StageAccepted>>
on_stage_job(prefill_ptr self, const typed_envelope<wire::StageJob>& msg) {
  auto& st = self->state;
  if (group_size(st) <= 1 || stage_index(st) == 0)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "this prefill instance is no stage of a group"));
  if (!sent_by(self, group_head(st)))
    return st.bad.refuse(st.name, denied("only the head of the group sends a stage job"));
  auto job = decode_stage_job(msg, st);
  if (!job)
    return st.bad.refuse(st.name, std::move(job.error()));
  if (auto err = check_stage_job(*job, st))
    return st.bad.refuse(st.name, std::move(err));
  // A second copy, after the first ran, would write into the head's pages again, which by
  // then may hold another request's KV.
  if (auto err = refuse_if_taken(st, job->request_id, "stage"))
    return err;
  if (st.stage)
    return make_error(errc::no_space, "prefill stage " + std::to_string(st.options.instance) +
                                          " is busy with request " +
                                          std::to_string(st.stage->request_id));
  const uint32_t block = st.parts.engine->config().block_tokens;
  const auto total = static_cast<uint32_t>(job->tokens.size());
  job->pages = st.parts.kv_pages->allocate((total + block - 1) / block);
  if (job->pages.size() != job->head_pages.size()) {
    for (const auto& p : job->pages)
      (void)st.parts.kv_pages->free(p);
    return make_error(errc::internal, "prefill stage KV pages exhausted");
  }
  if (auto err = map_slots(*st.parts.kv_pages, job->pages, job->page_ptrs)) {
    for (const auto& p : job->pages) // a broken invariant: pages just allocated
      (void)st.parts.kv_pages->free(p);
    return err;
  }
  job->chunks = chunk_count(total, job->cached_tokens, st.options.chunk_tokens);
  job->arrived.assign(job->chunks, false);
  job->position = job->cached_tokens;
  job->layer = stage_layers(st, stage_index(st)).first;
  job->pages_sent = job->cached_tokens / block; // the head sent those whole
  const auto id = job->request_id;
  if (st.early_inbox && st.early_inbox->first == id)
    job->out.inbox = std::move(st.early_inbox->second);
  st.early_inbox.reset();
  st.recent_jobs.insert(id);
  st.stage = std::move(*job);
  heard_of_stage_job(self, *st.stage);
  self->monitor(st.parts.dir->prefill[group_head(st)]);
  send_inbox(self, *st.stage);
  read_prefix(self);
  finish_if_quiet(self); // a refused read
  return make_envelope<wire::StageAccepted>([&](wire::StageAccepted::Builder out) {
    out.setRequestId(id);
    out.setStage(stage_index(st));
  });
}

void on_stage_inbox(prefill_ptr self, const typed_envelope<wire::StageInbox>& msg) {
  auto& st = self->state;
  if (group_size(st) <= 1 || stage_index(st) + 1 >= group_size(st) ||
      !sent_by(self, st.options.instance + 1)) {
    st.bad.refuse(st.name, denied("only the next stage of the group sends its inbox"));
    return;
  }
  auto read = read_as<wire::StageInbox>(
      msg,
      [&](wire::StageInbox::Reader in)
          -> caf::expected<std::pair<uint64_t, std::vector<transport::region_handle>>> {
        if (in.getSlots().size() > st.chunks_max)
          return make_error(errc::limit_exceeded, "a stage inbox of too many slots");
        std::vector<transport::region_handle> slots;
        for (auto s : in.getSlots())
          slots.push_back(transport::from_wire(s));
        return std::make_pair(in.getRequestId(), std::move(slots));
      });
  if (!read) {
    st.bad.refuse(st.name, std::move(read.error()));
    return;
  }
  stream_out* out = nullptr;
  if (auto* j = head_job(st, read->first); j && st.current && j == &*st.current)
    out = &j->out;
  else if (st.stage && st.stage->request_id == read->first)
    out = &st.stage->out;
  if (out == nullptr) {
    st.early_inbox = std::move(*read); // this stage has not been asked yet
    return;
  }
  out->inbox = std::move(read->second);
  if (!out->waiting.empty()) {
    auto waiting = std::move(out->waiting);
    out->waiting.clear();
    const auto bytes = st.parts.engine->stream_bytes(st.options.chunk_tokens);
    for (auto c : waiting) {
      // Re-sent from the outbox, which holds them: as forward_stream with no new copy.
      if (c >= out->inbox.size())
        continue;
      const std::vector<transport::transfer_op> ops{
          {transport::op_kind::write, outbox_slot(st, c).first(bytes), out->inbox[c], 0, true}};
      ++out->in_flight;
      submit_io(self, read->first, io_stream, c, ops, [&](caf::error err) {
        --out->in_flight;
        spdlog::warn("prefill_worker: a stream write was refused: {}", describe(err));
      });
    }
  }
}

void on_stage_chunk(prefill_ptr self, const typed_envelope<wire::StageChunk>& msg) {
  auto& st = self->state;
  if (group_size(st) <= 1 || stage_index(st) == 0 || !sent_by(self, st.options.instance - 1)) {
    st.bad.refuse(st.name, denied("only the stage before sends a chunk"));
    return;
  }
  auto read = read_as<wire::StageChunk>(msg, [&](wire::StageChunk::Reader in) {
    return caf::expected<std::pair<uint64_t, uint32_t>>{
        std::make_pair(in.getRequestId(), in.getChunk())};
  });
  if (!read) {
    st.bad.refuse(st.name, std::move(read.error()));
    return;
  }
  if (!st.stage || st.stage->request_id != read->first)
    return; // of a job that ended here
  if (read->second >= st.stage->chunks) {
    st.bad.refuse(st.name, make_error(errc::invalid_argument, "no such chunk of the stage job"));
    return;
  }
  st.stage->arrived[read->second] = true;
  heard_of_stage_job(self, *st.stage);
  compute_stage(self);
}

void on_stage_done(prefill_ptr self, const typed_envelope<wire::StageDone>& msg) {
  auto& st = self->state;
  const uint32_t x = group_size(st);
  uint32_t from = UINT32_MAX;
  for (uint32_t k = 1; k < x && stage_index(st) == 0; ++k)
    if (sent_by(self, st.options.instance + k))
      from = k;
  if (from == UINT32_MAX) {
    st.bad.refuse(st.name, denied("only a stage of this head's group says it is done"));
    return;
  }
  struct done {
    uint64_t id;
    uint32_t stage;
    bool ok;
    std::string reason;
    uint32_t first_token;
    uint64_t compute_ns;
    uint64_t tail_ns;
  };
  auto read = read_as<wire::StageDone>(msg, [&](wire::StageDone::Reader in) {
    return caf::expected<done>{done{in.getRequestId(), in.getStage(), in.getOk(),
                                    in.getReason().cStr(), in.getFirstToken(), in.getComputeNs(),
                                    in.getTailNs()}};
  });
  if (!read || read->stage != from) {
    st.bad.refuse(st.name, read ? make_error(errc::invalid_argument, "a stage named another")
                                : std::move(read.error()));
    return;
  }
  auto* job = head_job(st, read->id);
  if (job == nullptr)
    return; // of a job that ended
  if (read->ok) {
    job->stage_compute_ns[from] = read->compute_ns;
    if (from + 1 == x) {
      job->first_token = read->first_token;
      job->last_stage_tail_ns = read->tail_ns;
    }
  }
  end_stage(self, *job, from, read->ok, read->reason);
}

void on_stage_abort(prefill_ptr self, const typed_envelope<wire::StageAbort>& msg) {
  auto& st = self->state;
  if (group_size(st) <= 1 || stage_index(st) == 0 || !sent_by(self, group_head(st))) {
    st.bad.refuse(st.name, denied("only the head of the group aborts a stage"));
    return;
  }
  auto id = read_as<wire::StageAbort>(
      msg, [](wire::StageAbort::Reader in) { return caf::expected<uint64_t>{in.getRequestId()}; });
  if (!id) {
    st.bad.refuse(st.name, std::move(id.error()));
    return;
  }
  if (!st.stage || st.stage->request_id != *id) {
    // Refused or ended already: say so, so that the head stops waiting. Or not come yet (the
    // abort overtook it on the way): it is refused when it comes, as a copy of a job taken is,
    // for the head has moved on and nothing would send its chunks.
    st.recent_jobs.insert(*id);
    stage_job gone;
    gone.request_id = *id;
    gone.failure = make_error(errc::invalid_argument, "not running");
    send_done(self, gone);
    return;
  }
  fail_stage(self, make_error(errc::invalid_argument, "aborted by the head"));
}

void on_stage_io(prefill_ptr self, uint64_t request_id, uint32_t kind, uint32_t index,
                 const caf::error& err) {
  auto& st = self->state;
  // Only the engine's callback (an anonymous message) says a transfer ended.
  if (self->current_sender() != nullptr) {
    st.bad.refuse(st.name, denied("only the transfer engine ends a stage's transfer"));
    return;
  }
  stream_out* out = nullptr;
  stage_job* stage = st.stage && st.stage->request_id == request_id ? &*st.stage : nullptr;
  prefill_job* head = head_job(st, request_id);
  if (kind == io_stream)
    out = stage != nullptr ? &stage->out : head != nullptr ? &head->out : nullptr;
  if (kind == io_stream && out != nullptr && out->in_flight > 0) {
    --out->in_flight;
    if (!err) {
      const auto next = st.options.instance + 1;
      auto msg = make_envelope<wire::StageChunk>([&](wire::StageChunk::Builder b) {
        b.setRequestId(request_id);
        b.setChunk(index);
      });
      self->send(st.parts.dir->prefill[next], stage_chunk_atom::value, msg);
    }
    if (stage != nullptr) {
      if (err)
        fail_stage(self, make_error(errc::internal, "a stream write failed: " + describe(err)));
      else
        finish_if_quiet(self);
    } else if (st.draining && head == &*st.draining) {
      finish_draining(self);
    } else if (err) {
      fail_when_idle(self, "a stream to stage 1 failed: " + describe(err));
    }
    return;
  }
  if (stage == nullptr || stage->in_flight == 0 || kind == io_stream)
    return; // rare: of a job that ended
  --stage->in_flight;
  if (err) {
    fail_stage(self, make_error(errc::internal, std::string{kind == io_prefix ? "reading the prefix"
                                                                              : "a KV write"} +
                                                    " failed: " + describe(err)));
    return;
  }
  if (kind == io_prefix)
    stage->loaded = true;
  compute_stage(self);
  finish_if_quiet(self);
}

void on_stage_step(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.stage;
  job.stepping = false;
  if (!job.failure) {
    submit_stage_kv(self);
    const auto layers = stage_layers(st, stage_index(st));
    if (job.layer == layers.end) {
      const auto total = static_cast<uint32_t>(job.tokens.size());
      const uint32_t n = std::min(st.options.chunk_tokens, total - job.position);
      if (layers.end < st.parts.engine->config().layers) {
        const size_t floats =
            (st.parts.engine->stream_bytes(n) + sizeof(float) - 1) / sizeof(float);
        forward_stream(self, job.out, job.request_id, job.chunk,
                       std::span{job.stream}.first(floats));
      }
      job.position += n;
      ++job.chunk;
      job.layer = layers.first;
      if (job.chunk == job.chunks)
        job.computed_ns = clock_ns(self);
    }
    compute_stage(self);
  }
  finish_if_quiet(self);
}

void on_stage_peer_down(prefill_ptr self, const caf::actor_addr& who, const caf::error& reason) {
  auto& st = self->state;
  if (group_size(st) <= 1)
    return;
  const auto& dir = *st.parts.dir;
  if (st.stage && who == dir.prefill[group_head(st)].address()) {
    fail_stage(self, make_error(errc::internal, "the head of the group stopped"));
    return;
  }
  for (auto* job : {st.current ? &*st.current : nullptr, st.draining ? &*st.draining : nullptr}) {
    if (job == nullptr || !job->grouped)
      continue;
    for (uint32_t k = 1; k < job->stage_state.size(); ++k)
      if (job->stage_state[k] == stage_waiting &&
          who == dir.prefill[group_head(st) + k].address()) {
        end_stage(self, *job, k, false, "stopped: " + caf::to_string(reason));
        return;
      }
  }
}

} // namespace crescent
