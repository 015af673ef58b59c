// Progress of a request: the first token from prefill, the rest from decode, and its ending.
#include "actors/common/continuous_batch.hpp"
#include "actors/common/node_set.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/request/request_state.hpp"
#include "gpu/model_config.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/stateful_actor.hpp>

#include <algorithm>

namespace crescent {

namespace {

wire::Status to_wire(request_status s) {
  switch (s) {
  case request_status::completed:
    return wire::Status::COMPLETED;
  case request_status::rejected:
    return wire::Status::REJECTED;
  case request_status::failed:
    break;
  }
  return wire::Status::FAILED;
}

typed_envelope<wire::RequestOutcome> make_outcome(request_ptr self, request_status status,
                                                  const std::string& reason) {
  auto& st = self->state;
  return make_envelope<wire::RequestOutcome>([&](wire::RequestOutcome::Builder out) {
    out.setRequestId(st.client_id);
    out.setStatus(to_wire(status));
    out.setReason(reason);
    out.setArrivalNs(st.arrival_ns);
    copy_to(out.initTokenTimesNs(static_cast<unsigned>(st.token_times_ns.size())),
            st.token_times_ns);
    copy_to(out.initTokens(static_cast<unsigned>(st.output.size())), st.output);
    out.setComputedTokens(st.computed_tokens);
    out.setReusedTokens(st.reused_tokens);
    out.setLoadMisses(st.load_misses);
    out.setPrefillInstance(st.prefill_instance);
    out.setDecodeInstance(st.decode_instance);
    out.setPrefillComputeNs(st.prefill_compute_ns);
    out.setKvTailNs(st.kv_tail_ns);
    out.setKvBusyNs(st.kv_busy_ns);
    out.setPrefillQueueNs(st.prefill_queue_ns);
    copy_to(out.initStageComputeNs(static_cast<unsigned>(st.stage_compute_ns.size())),
            st.stage_compute_ns);
    out.setRemoteReusedTokens(st.remote_reused_tokens);
    out.setSsdReusedTokens(st.ssd_reused_tokens);
    copy_to(out.initPulledFrom(static_cast<unsigned>(st.pulled_from.size())), st.pulled_from);
    out.setPredictedTtftNs(st.predicted_ttft_ns);
    out.setRetryAfterMs(st.retry_after_ms);
    out.setRetries(st.attempt);
  });
}

void append_tokens(request_ptr self, const std::vector<uint32_t>& tokens) {
  auto& st = self->state;
  const auto t = now_ns(self);
  const size_t before = st.output.size();
  for (auto tok : tokens) {
    if (st.output.size() >= st.max_new_tokens)
      break; // a worker sent more than asked for: keep what was asked
    st.output.push_back(tok);
    st.token_times_ns.push_back(t);
  }
  if (st.listener && st.output.size() > before)
    send_token_batch(self, st.listener, st.client_id, std::span{st.output}.subspan(before),
                     st.output.size() >= st.max_new_tokens, static_cast<uint32_t>(before));
}

void maybe_complete(request_ptr self) {
  auto& st = self->state;
  if (st.first_token_seen && st.final_seen)
    finish(self, request_status::completed, "");
}

void stop_watching_prefill(request_ptr self) {
  auto& st = self->state;
  if (!st.coupled && !prefill_owes(st)) // a coupled instance is watched to the end
    self->demonitor(st.dir->prefill[st.prefill_instance].address());
}

// Whose word the request takes: its prefill instance's for the first token, its decode
// instance's for the rest (one coupled instance for both), either's or the conductor's for its
// failure. Nobody's before it is placed.
caf::actor_addr prefill_worker_of(const request_state& st) {
  if (!st.placed)
    return {};
  return st.coupled ? st.dir->coupled[st.prefill_instance].address()
                    : st.dir->prefill[st.prefill_instance].address();
}

caf::actor_addr decode_worker_of(const request_state& st) {
  if (!st.placed)
    return {};
  return st.coupled ? st.dir->coupled[st.decode_instance].address()
                    : st.dir->decode[st.decode_instance].address();
}

} // namespace

namespace {

std::chrono::nanoseconds quiet_timeout_of(const request_state& st) {
  return st.coupled ? coupled_quiet_timeout : decode_quiet_timeout;
}

void arm_quiet_watch(request_ptr self, std::chrono::nanoseconds after) {
  auto& st = self->state;
  if (st.quiet_watch)
    return;
  st.quiet_watch = true;
  self->delayed_send(self, after, quiet_atom::value);
}

// The tokens of the current attempt in hand, in order from its first: a coupled instance that
// sent more lost them on the way.
uint32_t attempt_tokens_in(const request_state& st) {
  return st.first_token_seen ? static_cast<uint32_t>(st.output.size() - st.resumed_at) : 0;
}

void on_probe_reply(request_ptr self, const typed_envelope<wire::JobProbeReply>& msg) {
  auto& st = self->state;
  struct probe_reply {
    uint64_t id;
    bool held;
    uint32_t sent;
  };
  auto r = read_as<wire::JobProbeReply>(msg, [](wire::JobProbeReply::Reader in) {
    return probe_reply{in.getRequestId(), in.getHeld(), in.getSentTokens()};
  });
  const std::string who = "coupled instance " + std::to_string(st.decode_instance);
  if (!r || r->id != st.id) {
    fail_or_retry(self, failed_part::prefill, request_status::failed,
                  who + " answered a probe of the request wrongly");
    return;
  }
  const uint32_t in = attempt_tokens_in(st);
  if (!r->held)
    fail_or_retry(self, failed_part::prefill, request_status::failed,
                  who + " no longer holds the request, " + std::to_string(in) +
                      " of its tokens came, none for " +
                      std::to_string(coupled_quiet_timeout.count()) + " s");
  else if (r->sent > in)
    fail_or_retry(self, failed_part::prefill, request_status::failed,
                  who + " sent " + std::to_string(r->sent) + " tokens, " + std::to_string(in) +
                      " of them came, none for " + std::to_string(coupled_quiet_timeout.count()) +
                      " s");
  else // busy with others (a queue, whole-prompt prefills): look again later
    arm_quiet_watch(self, coupled_quiet_timeout);
}

// A coupled instance quiet for coupled_quiet_timeout is asked where the job stands.
void probe_coupled(request_ptr self) {
  auto& st = self->state;
  auto msg =
      make_envelope<wire::JobProbe>([&](wire::JobProbe::Builder out) { out.setRequestId(st.id); });
  const uint32_t attempt = st.attempt;
  const uint32_t instance = st.decode_instance;
  self->request(st.dir->coupled[instance], control_timeout, probe_atom::value, msg)
      .then(
          [=](const typed_envelope<wire::JobProbeReply>& reply) {
            if (self->state.attempt == attempt && !self->state.done)
              on_probe_reply(self, reply);
          },
          [=](caf::error& err) {
            if (self->state.attempt != attempt || self->state.done)
              return;
            fail_or_retry(self, failed_part::prefill, request_status::failed,
                          "coupled instance " + std::to_string(instance) + " sent nothing for " +
                              std::to_string(coupled_quiet_timeout.count()) +
                              " s and did not answer a probe: " + describe(err));
          });
}

} // namespace

void heard_from_worker(request_ptr self) {
  auto& st = self->state;
  st.last_token_ns = now_ns(self);
  arm_quiet_watch(self, quiet_timeout_of(st));
}

void on_quiet(request_ptr self) {
  auto& st = self->state;
  st.quiet_watch = false;
  if (st.done || (st.first_token_seen && st.final_seen))
    return;
  // Nothing heard in this attempt (an earlier one armed the watch): the next token (or a
  // coupled instance's acceptance) arms it.
  if (!(st.coupled ? st.reserved : st.first_token_seen || st.decode_heard))
    return;
  const auto timeout = quiet_timeout_of(st);
  const auto quiet = std::chrono::nanoseconds(now_ns(self) - st.last_token_ns);
  if (quiet < timeout) { // tokens came meanwhile: look again when due
    arm_quiet_watch(self, timeout - quiet);
    return;
  }
  if (st.coupled) {
    probe_coupled(self);
    return;
  }
  fail_or_retry(self, failed_part::decode, request_status::failed,
                "decode instance " + std::to_string(st.decode_instance) + " sent no token for " +
                    std::to_string(decode_quiet_timeout.count()) + " s");
}

bool prefill_owes(const request_state& st) {
  return !st.first_token_seen || !st.decode_heard;
}

int64_t now_ns(request_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

namespace {

// What a PrefillDone says.
struct prefill_done {
  uint64_t id;
  uint32_t first, computed, reused, remote, ssd, misses;
  uint64_t compute_ns, kv_tail_ns, kv_busy_ns, queue_ns;
  std::vector<uint64_t> stages;
  std::vector<uint32_t> pulled_from;
};

// The prefill's figures for the request's report.
void take_prefill_figures(request_state& st, prefill_done& d) {
  st.computed_tokens = d.computed;
  st.reused_tokens = d.reused;
  st.remote_reused_tokens = std::min(d.remote, d.reused);
  st.ssd_reused_tokens = std::min(d.ssd, d.reused - st.remote_reused_tokens);
  st.load_misses = d.misses;
  st.prefill_compute_ns = d.compute_ns;
  st.kv_tail_ns = d.kv_tail_ns;
  st.kv_busy_ns = d.kv_busy_ns;
  st.prefill_queue_ns = d.queue_ns;
  st.stage_compute_ns = std::move(d.stages);
  st.pulled_from = std::move(d.pulled_from);
}

} // namespace

caf::result<void> on_prefill_done(request_ptr self, const typed_envelope<wire::PrefillDone>& msg) {
  auto& st = self->state;
  auto d = read_as<wire::PrefillDone>(
      msg, [](wire::PrefillDone::Reader in) -> caf::expected<prefill_done> {
        if (in.getStageComputeNs().size() > gpu::model_layers_max)
          return make_error(errc::limit_exceeded, "a PrefillDone of more stages than layers");
        if (in.getPulledFrom().size() > node_set::capacity)
          return make_error(errc::limit_exceeded,
                            "a PrefillDone pulled from more nodes than a cluster has");
        return prefill_done{in.getRequestId(),
                            in.getFirstToken(),
                            in.getComputedTokens(),
                            in.getReusedTokens(),
                            in.getRemoteReusedTokens(),
                            in.getSsdReusedTokens(),
                            in.getLoadMisses(),
                            in.getComputeNs(),
                            in.getKvTailNs(),
                            in.getKvBusyNs(),
                            in.getQueueNs(),
                            to_vector(in.getStageComputeNs()),
                            to_vector(in.getPulledFrom())};
      });
  if (!d)
    return std::move(d.error());
  if (earlier_attempt(st, d->id))
    return caf::unit;
  if (auto err = refuse_unless_sent_by(self, prefill_worker_of(st), "the first token",
                                       "the request's prefill instance"))
    return err;
  if (!st.running || st.done || d->id != st.id || st.first_token_seen)
    return make_error(errc::invalid_argument, "unexpected PrefillDone");
  st.first_token_seen = true;
  stop_watching_prefill(self);
  if (st.resumed_at == 0) // a resumed attempt's prefill is not the prompt's: its figures stay
    take_prefill_figures(st, *d);
  append_tokens(self, {d->first});
  heard_from_worker(self);
  append_tokens(self, st.early_tokens);
  st.early_tokens.clear();
  maybe_complete(self);
  return caf::unit;
}

namespace {

// The index in the current attempt's output that its next decoded token has: after its first
// token (index 0, from prefill) and the decoded ones already in. A resumed attempt's output
// starts after the tokens of the attempts before it.
uint32_t next_index(const request_state& st) {
  return static_cast<uint32_t>(st.first_token_seen ? st.output.size() - st.resumed_at
                                                   : 1 + st.early_tokens.size());
}

// Takes a batch whose first token is the next one.
void take_in_order(request_ptr self, const std::vector<uint32_t>& tokens, bool final) {
  auto& st = self->state;
  if (!tokens.empty() || final)
    heard_from_worker(self);
  if (st.first_token_seen)
    append_tokens(self, tokens);
  else // decode overtook the prefill's report (possible across processes): keep the order
    st.early_tokens.insert(st.early_tokens.end(), tokens.begin(), tokens.end());
  st.final_seen = final;
}

} // namespace

caf::result<void> on_tokens(request_ptr self, const typed_envelope<wire::TokenBatch>& msg) {
  auto& st = self->state;
  struct batch {
    uint64_t id;
    std::vector<uint32_t> tokens;
    bool final;
    uint32_t first;
  };
  auto b = read_as<wire::TokenBatch>(msg, [](wire::TokenBatch::Reader in) {
    auto t = in.getTokens();
    return batch{in.getRequestId(), to_vector(t), in.getFinal(), in.getFirst()};
  });
  if (!b)
    return std::move(b.error());
  if (earlier_attempt(st, b->id))
    return caf::unit;
  if (auto err = refuse_unless_sent_by(self, decode_worker_of(st), "tokens",
                                       "the request's decode instance"))
    return err;
  if (!st.running || st.done || b->id != st.id || b->first == 0 ||
      uint64_t{b->first} + b->tokens.size() > attempt_max_new(st))
    return make_error(errc::invalid_argument, "unexpected TokenBatch");
  st.decode_heard = true;
  stop_watching_prefill(self);
  const uint32_t next = next_index(st);
  if (b->first + b->tokens.size() <= next && (!b->final || st.final_seen)) {
    ++st.duplicate_batches; // had it already: a duplicate on the way
    return caf::unit;
  }
  if (b->first > next) { // one sent before it is late: it waits for that one
    if (st.later_batches.size() >= st.max_new_tokens)
      return make_error(errc::limit_exceeded, "too many token batches out of order");
    st.later_batches[b->first] = {std::move(b->tokens), b->final};
    return caf::unit;
  }
  // Overlapping what it has: only the new tail counts.
  const auto skip = std::min<size_t>(next - b->first, b->tokens.size());
  b->tokens.erase(b->tokens.begin(), b->tokens.begin() + static_cast<ptrdiff_t>(skip));
  take_in_order(self, b->tokens, b->final);
  for (auto i = st.later_batches.begin(); i != st.later_batches.end() && i->first <= next_index(st);
       i = st.later_batches.erase(i)) {
    const uint32_t at = next_index(st);
    auto& later = i->second;
    const auto had = std::min<size_t>(at - i->first, later.tokens.size());
    later.tokens.erase(later.tokens.begin(), later.tokens.begin() + static_cast<ptrdiff_t>(had));
    take_in_order(self, later.tokens, later.final);
  }
  maybe_complete(self);
  return caf::unit;
}

caf::result<void> on_failed(request_ptr self, const typed_envelope<wire::RequestFailed>& msg) {
  auto& st = self->state;
  struct failure {
    uint64_t id;
    std::string reason;
  };
  auto f = read_as<wire::RequestFailed>(msg, [](wire::RequestFailed::Reader in) {
    return failure{in.getRequestId(), in.getReason()};
  });
  if (!f)
    return std::move(f.error());
  if (earlier_attempt(st, f->id))
    return caf::unit;
  if (!sent_by(self, st.dir->conductor.address()) && !sent_by(self, decode_worker_of(st)))
    if (auto err = refuse_unless_sent_by(self, prefill_worker_of(st), "a failure",
                                         "the request's conductor, prefill or decode instance"))
      return err;
  if (!st.running || f->id != st.id)
    return make_error(errc::invalid_argument, "RequestFailed for another request");
  fail_or_retry(self, failed_part::either, request_status::failed, f->reason);
  return caf::unit;
}

void end_attempt(request_ptr self, request_status status) {
  auto& st = self->state;
  if (st.reserved && status != request_status::completed) {
    auto msg = make_envelope<wire::ReleaseRequest>(
        [&](wire::ReleaseRequest::Builder out) { out.setRequestId(st.id); });
    // Sent with this actor as sender: the worker checks that the requester releases.
    if (st.coupled)
      self->send(st.dir->coupled[st.decode_instance], release_atom::value, msg);
    else
      self->send(st.dir->decode[st.decode_instance], release_atom::value, msg);
  }
  if (st.placed) {
    auto msg = make_envelope<wire::RequestReport>([&](wire::RequestReport::Builder out) {
      out.setRequestId(st.id);
      out.setCompleted(status == request_status::completed);
    });
    // Sent with this actor as sender: the conductor takes it only from the request it placed.
    self->send(st.dir->conductor, finished_atom::value, msg);
  }
}

void finish(request_ptr self, request_status status, const std::string& reason) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  end_attempt(self, status);
  st.client.deliver(make_outcome(self, status, reason));
  self->quit();
}

} // namespace crescent
