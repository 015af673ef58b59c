// The life of a request: placement, reservation, prefill submission, and its one ending.
#include "actors/common/ask_again.hpp"
#include "actors/common/code_probe.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/request/request_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"
#include "storage/block_key.hpp"
#include "transport/region_handle.hpp"

#include <caf/stateful_actor.hpp>

#include <algorithm>
#include <chrono>

namespace crescent {

namespace {

struct spec {
  uint64_t id;
  std::vector<uint32_t> tokens;
  uint32_t max_new_tokens;
  uint32_t deadline_ms;
  wire::KvSend kv_send;
};

caf::expected<spec> read_spec(const typed_envelope<wire::RequestSpec>& msg,
                              const request_options& opt) {
  return read_as<wire::RequestSpec>(msg, [&](wire::RequestSpec::Reader in) {
    auto tokens = in.getTokens();
    if (in.getRequestId() > client_id_max)
      return caf::expected<spec>{make_error(
          errc::invalid_argument, "request id " + std::to_string(in.getRequestId()) +
                                      " is above 2^56 - 1 (the top byte numbers its attempts)")};
    if (tokens.size() == 0 || tokens.size() > opt.context_tokens_max)
      return caf::expected<spec>{
          make_error(errc::limit_exceeded, "prompt of " + std::to_string(tokens.size()) +
                                               " tokens is outside [1, " +
                                               std::to_string(opt.context_tokens_max) + "]")};
    for (auto t : tokens)
      if (t >= opt.vocab)
        return caf::expected<spec>{
            make_error(errc::invalid_argument,
                       "token id " + std::to_string(t) + " is outside the vocabulary")};
    if (in.getMaxNewTokens() == 0)
      return caf::expected<spec>{
          make_error(errc::invalid_argument, "max_new_tokens must be at least 1")};
    if (in.getKvSend() > wire::KvSend::STREAM)
      return caf::expected<spec>{make_error(
          errc::invalid_argument, "kvSend must be config, after or stream (an unknown value: " +
                                      std::to_string(static_cast<int>(in.getKvSend())) + ")")};
    return caf::expected<spec>{spec{in.getRequestId(), to_vector(tokens), in.getMaxNewTokens(),
                                    in.getDeadlineMs(), in.getKvSend()}};
  });
}

// An answer to one of this request's asks that comes after its attempt failed: the attempt
// let go of all it holds, and its answers are not the current attempt's.
bool from_earlier_attempt(request_ptr self, uint32_t attempt) {
  return self->state.attempt != attempt;
}

// A worker refused an ask of the current attempt: for load (a full queue, no memory) that is
// admission's answer; anything else (the ask or its answer lost on the way, say) failed the
// attempt, and another instance may take it.
void refused(request_ptr self, bool load, failed_part part, request_status status,
             const std::string& reason) {
  if (load)
    finish(self, request_status::rejected, reason);
  else
    fail_or_retry(self, part, status, reason);
}

// The next attempt: its number, and the id its messages carry.
void next_attempt(request_state& st) {
  ++st.attempt;
  st.id = st.client_id | uint64_t{st.attempt} << attempt_id_shift;
}

// What an earlier attempt was given after it let go (a reservation, a coupled job taken) is
// given back at once, under that attempt's id, rather than held until the request ends.
template <class Worker>
void give_back(request_ptr self, const Worker& worker, uint64_t attempt_id) {
  auto msg = make_envelope<wire::ReleaseRequest>(
      [&](wire::ReleaseRequest::Builder out) { out.setRequestId(attempt_id); });
  self->send(worker, release_atom::value, msg);
}

// Asks a worker for the current attempt, again while it goes unanswered (ask_again.hpp).
template <class Worker, class Atom, class Msg, class Answered, class Refused>
void ask(request_ptr self, const Worker& worker, Atom atom, const Msg& msg, Answered answered,
         Refused refused) {
  const uint32_t attempt = self->state.attempt;
  auto wanted = [=] { return !from_earlier_attempt(self, attempt) && !self->state.done; };
  ask_again(self, worker, atom, msg, wanted, answered, refused);
}

// The prompt and its block keys, as a job to a prefill or coupled instance carries them.
template <class Builder>
void write_prompt(const request_state& st, Builder out) {
  copy_to(out.initTokens(static_cast<unsigned>(st.tokens.size())), st.tokens);
  write_keys(out.initBlockKeys(static_cast<unsigned>(st.keys.size())), st.keys);
}

void submit_prefill(request_ptr self, std::vector<transport::region_handle> pages) {
  auto& st = self->state;
  const size_t prompt_pages =
      (st.tokens.size() + st.options.block_tokens - 1) / st.options.block_tokens;
  if (pages.size() < prompt_pages) {
    finish(self, request_status::failed, "decode reservation is too small for the prompt");
    return;
  }
  auto msg = make_envelope<wire::PrefillJob>([&](wire::PrefillJob::Builder out) {
    out.setRequestId(st.id);
    write_prompt(st, out);
    out.setDecodeInstance(st.decode_instance);
    out.setPull(st.pull);
    out.setKvSend(st.kv_send);
    auto list = out.initDecodePages(static_cast<unsigned>(prompt_pages));
    for (unsigned i = 0; i < prompt_pages; ++i)
      transport::to_wire(pages[i], list[i]);
  });
  self->monitor(st.dir->prefill[st.prefill_instance]);
  const uint32_t attempt = st.attempt;
  ask(
      self, st.dir->prefill[st.prefill_instance], prefill_atom::value, msg,
      [](const typed_envelope<wire::PrefillAccepted>&) {},
      [=](caf::error& err) {
        // already_exists: a copy of the job reached the instance after the job, whose
        // answer was lost; the instance has it (its own messages tell the rest).
        if (from_earlier_attempt(self, attempt) || is(err, errc::already_exists))
          return;
        // A full queue is overload.
        refused(self, is(err, errc::no_space), failed_part::prefill, request_status::failed,
                "prefill refused the job: " + describe(err));
      });
}

// A coupled instance prefills and decodes the request itself: one job, no reservation.
void submit_coupled(request_ptr self) {
  auto& st = self->state;
  auto msg = make_envelope<wire::CoupledJob>([&](wire::CoupledJob::Builder out) {
    out.setRequestId(st.id);
    write_prompt(st, out);
    out.setMaxNewTokens(attempt_max_new(st));
  });
  const uint32_t attempt = st.attempt;
  const uint64_t id = st.id;
  const auto instance = st.dir->coupled[st.prefill_instance];
  auto taken = [=] {
    if (from_earlier_attempt(self, attempt)) {
      give_back(self, instance, id);
      return;
    }
    self->state.reserved = true;
    heard_from_worker(self); // its quiet watch starts
  };
  ask(
      self, instance, prefill_atom::value, msg,
      [=](const typed_envelope<wire::PrefillAccepted>&) { taken(); },
      [=](caf::error& err) {
        // A copy of the job reached the instance after the job, whose answer was lost: the
        // instance has it, or had it (then the quiet watch's probe finds it gone).
        if (is(err, errc::already_exists)) {
          taken();
          return;
        }
        if (from_earlier_attempt(self, attempt))
          return;
        // A full queue, or a request larger than the instance's memory, is load.
        refused(self, is(err, errc::no_space) || is(err, errc::limit_exceeded),
                failed_part::prefill, request_status::failed,
                "coupled instance refused the job: " + describe(err));
      });
}

bool try_next_decode(request_ptr self);

void reserve(request_ptr self) {
  auto& st = self->state;
  auto msg = make_envelope<wire::ReserveRequest>([&](wire::ReserveRequest::Builder out) {
    out.setRequestId(st.id);
    out.setPromptTokens(static_cast<uint32_t>(st.tokens.size()));
    out.setMaxNewTokens(attempt_max_new(st));
    out.setPrefillInstance(st.prefill_instance);
  });
  const uint32_t attempt = st.attempt;
  const uint64_t id = st.id;
  const auto instance = st.dir->decode[st.decode_instance];
  ask(
      self, instance, reserve_atom::value, msg,
      [=](const typed_envelope<wire::ReserveReply>& reply) {
        if (from_earlier_attempt(self, attempt)) {
          give_back(self, instance, id);
          return;
        }
        auto pages = read_as<wire::ReserveReply>(reply, [](wire::ReserveReply::Reader in) {
          std::vector<transport::region_handle> out;
          for (auto p : in.getPages())
            out.push_back(transport::from_wire(p));
          return out;
        });
        if (!pages) {
          finish(self, request_status::failed, "bad reservation: " + describe(pages.error()));
          return;
        }
        self->state.reserved = true;
        if (!self->state.done)
          submit_prefill(self, std::move(*pages));
      },
      [=](caf::error& err) {
        if (from_earlier_attempt(self, attempt))
          return;
        if (is(err, errc::no_space) && try_next_decode(self)) {
          CRESCENT_PROBE("request.decode_elsewhere");
          return;
        }
        // No KV memory for it on any decode instance is load.
        refused(self, is(err, errc::no_space), failed_part::decode, request_status::rejected,
                "decode reservation: " + describe(err));
      });
}

// A retried request that no instance took waits at least this long before it asks again (the
// conductor's retry-after may be 0): the instances it waits for are busy or just failed.
constexpr auto place_again_wait_min = std::chrono::milliseconds(100);

// The placed decode instance has no KV memory for the request: the next one in turn is asked,
// until each has been; true if one is. The conductor still counts the request on the one it
// chose until the request ends (its decode load view is off by one request meanwhile).
bool try_next_decode(request_ptr self) {
  auto& st = self->state;
  const auto n = static_cast<uint32_t>(st.dir->decode.size());
  if (st.done || ++st.decode_tries >= n)
    return false;
  self->demonitor(st.dir->decode[st.decode_instance].address());
  st.decode_instance = (st.decode_instance + 1) % n;
  self->monitor(st.dir->decode[st.decode_instance]);
  reserve(self);
  return true;
}

struct schedule_reply {
  bool placed = false;
  uint32_t prefill = 0;
  uint32_t decode = 0;
  bool pull = false;
  uint64_t predicted_ttft_ns = 0;
  std::string reason;
  uint64_t retry_after_ms = 0;
};

void on_schedule_reply(request_ptr self, const typed_envelope<wire::ScheduleReply>& reply) {
  auto r = read_as<wire::ScheduleReply>(reply, [](wire::ScheduleReply::Reader in) {
    schedule_reply out;
    if (in.isPlaced()) {
      auto p = in.getPlaced();
      out.placed = true;
      out.prefill = p.getPrefillInstance();
      out.decode = p.getDecodeInstance();
      out.pull = p.getPull();
      out.predicted_ttft_ns = p.getPredictedTtftNs();
      return out;
    }
    out.reason = in.getRejected();
    out.retry_after_ms = in.getRetryAfterMs();
    return out;
  });
  auto& st = self->state;
  if (!r) {
    finish(self, request_status::failed, "bad placement: " + describe(r.error()));
    return;
  }
  if (!r->placed) {
    st.retry_after_ms = r->retry_after_ms;
    if (st.attempt == 0) {
      finish(self, request_status::rejected, r->reason);
      return;
    }
    // Placed before, and failed: no instance takes it now (the one left is full, say, with the
    // requests of the one that failed). It asks again when the conductor says, as a new attempt,
    // while its retries last; the refusal placed nothing under the old id.
    if (st.attempt < st.options.retries_max) {
      next_attempt(st);
      const auto wait =
          std::max(std::chrono::milliseconds(r->retry_after_ms), place_again_wait_min);
      self->delayed_send(self, wait, schedule_atom::value);
      return;
    }
    // What failed it is the news, not this refusal.
    finish(self, request_status::failed, st.retry_reason + " (placed again: " + r->reason + ")");
    return;
  }
  const bool coupled = !st.dir->coupled.empty();
  if (coupled ? r->prefill >= st.dir->coupled.size() || r->decode != r->prefill
              : r->prefill >= st.dir->prefill.size() || r->decode >= st.dir->decode.size()) {
    finish(self, request_status::failed, "placement names an unknown instance");
    return;
  }
  st.placed = true;
  st.prefill_instance = r->prefill;
  st.decode_instance = r->decode;
  st.pull = r->pull;
  st.predicted_ttft_ns = r->predicted_ttft_ns;
  if (coupled) {
    st.coupled = true;
    self->monitor(st.dir->coupled[st.prefill_instance]);
    submit_coupled(self);
    return;
  }
  // Watched from here: a message to a worker that is gone may get no answer at all (a proxy of
  // a lost process drops it), but monitoring one that is gone reports it at once.
  self->monitor(st.dir->decode[st.decode_instance]);
  reserve(self);
}

} // namespace

void schedule(request_ptr self) {
  auto& st = self->state;
  auto msg = make_envelope<wire::ScheduleRequest>([&](wire::ScheduleRequest::Builder out) {
    out.setRequestId(st.id);
    out.setPromptTokens(static_cast<uint32_t>(st.tokens.size()));
    out.setMaxNewTokens(attempt_max_new(st));
    write_keys(out.initBlockKeys(static_cast<unsigned>(st.keys.size())), st.keys);
    copy_to(out.initAvoidPrefill(static_cast<unsigned>(st.avoid_prefill.size())), st.avoid_prefill);
    copy_to(out.initAvoidDecode(static_cast<unsigned>(st.avoid_decode.size())), st.avoid_decode);
  });
  self->request(st.dir->conductor, control_timeout, schedule_atom::value, msg)
      .then(
          [=](const typed_envelope<wire::ScheduleReply>& reply) { on_schedule_reply(self, reply); },
          [=](caf::error& err) {
            finish(self, request_status::failed, "conductor: " + describe(err));
          });
}

caf::result<typed_envelope<wire::RequestOutcome>>
on_run(request_ptr self, const typed_envelope<wire::RequestSpec>& msg) {
  auto& st = self->state;
  if (st.running)
    return make_error(errc::already_exists, "this request actor is already running a request");
  auto s = read_spec(msg, st.options);
  if (!s)
    return std::move(s.error());
  st.running = true;
  st.client_addr = caf::actor_cast<caf::actor_addr>(self->current_sender());
  st.client_id = s->id;
  st.id = s->id;
  st.tokens = std::move(s->tokens);
  st.max_new_tokens = s->max_new_tokens;
  st.prompt_tokens = static_cast<uint32_t>(st.tokens.size());
  st.kv_send = s->kv_send;
  st.keys = storage::chain_block_keys(st.tokens, st.options.block_tokens, st.options.root_key);
  st.arrival_ns = now_ns(self);
  const uint32_t deadline_ms = s->deadline_ms > 0 ? s->deadline_ms : st.options.default_deadline_ms;
  self->delayed_send(self, std::chrono::milliseconds(deadline_ms), deadline_atom::value);
  st.client = self->make_response_promise<typed_envelope<wire::RequestOutcome>>();
  schedule(self);
  return st.client;
}

caf::result<typed_envelope<wire::RequestOutcome>>
on_stream(request_ptr self, const typed_envelope<wire::RequestSpec>& msg, caf::actor listener) {
  if (!listener)
    return self->state.bad.refuse(self->state.name,
                                  make_error(errc::invalid_argument, "a stream needs a listener"));
  auto& st = self->state;
  if (st.running)
    return on_run(self, msg); // refused: it runs already, for its first client and listener
  st.listener = caf::actor_cast<token_listener>(std::move(listener));
  auto result = on_run(self, msg);
  if (!st.running) // a bad spec: the listener must not hear a later run's tokens
    st.listener = token_listener{};
  return result;
}

namespace {

// Its prefill job, queued or running, stops and frees its pages (sent as this actor: the worker
// checks that the request that sent the job cancels it). Not once the first token came: the KV
// is with decode then, and the job only stores its blocks.
void cancel_prefill(request_ptr self) {
  auto& st = self->state;
  if (st.reserved && !st.coupled && !st.done && !st.first_token_seen) {
    auto msg = make_envelope<wire::ReleaseRequest>(
        [&](wire::ReleaseRequest::Builder out) { out.setRequestId(st.id); });
    self->send(st.dir->prefill[st.prefill_instance], cancel_atom::value, msg);
  }
}

} // namespace

void on_cancel(request_ptr self) {
  auto& st = self->state;
  if (refuse_unless_sent_by(self, st.client_addr, "a cancel", "the client that ran the request"))
    return;
  cancel_prefill(self);
  finish(self, request_status::failed, "cancelled by the client");
}

bool earlier_attempt(const request_state& st, uint64_t id) {
  return st.attempt > 0 && (id & client_id_max) == st.client_id &&
         (id >> attempt_id_shift) < st.attempt;
}

void fail_or_retry(request_ptr self, failed_part part, request_status status,
                   const std::string& reason) {
  auto& st = self->state;
  if (st.done)
    return;
  if (st.output.size() >= st.max_new_tokens) { // every token is in; only the word "final" is not
    finish(self, request_status::completed, "");
    return;
  }
  if (!st.placed || st.attempt >= st.options.retries_max) {
    finish(self, status, reason);
    return;
  }
  // The attempt lets go of all it holds, as an ending does (its job, its reservation, its
  // place in the conductor's count); what its workers still send names its id and is dropped.
  cancel_prefill(self);
  end_attempt(self, request_status::failed);
  // Only the last attempt's: whether an instance is down for good is the conductor's to know
  // (heartbeats); one that failed an earlier attempt may have been cut off for a while.
  st.avoid_prefill.clear();
  st.avoid_decode.clear();
  if (st.coupled) {
    self->demonitor(st.dir->coupled[st.prefill_instance].address());
    st.avoid_prefill.push_back(st.prefill_instance);
  } else {
    self->demonitor(st.dir->prefill[st.prefill_instance].address());
    self->demonitor(st.dir->decode[st.decode_instance].address());
    if (part != failed_part::decode)
      st.avoid_prefill.push_back(st.prefill_instance);
    if (part != failed_part::prefill)
      st.avoid_decode.push_back(st.decode_instance);
  }
  // Past its first token the next attempt continues the output: the prompt and the tokens so
  // far are its prompt (greedy decoding makes the same next token from a prefill of them as
  // from a decode step: the reference engine's tests check it bit for bit).
  if (!st.output.empty()) {
    st.resumed_at = static_cast<uint32_t>(st.output.size());
    st.tokens.resize(st.prompt_tokens);
    st.tokens.insert(st.tokens.end(), st.output.begin(), st.output.end());
    st.keys = storage::chain_block_keys(st.tokens, st.options.block_tokens, st.options.root_key);
  }
  st.placed = st.reserved = st.coupled = st.pull = false;
  st.decode_tries = 0;
  st.predicted_ttft_ns = 0;
  st.first_token_seen = st.decode_heard = st.final_seen = false;
  st.early_tokens.clear();
  st.later_batches.clear();
  st.retry_reason = reason;
  next_attempt(st);
  schedule(self);
}

} // namespace crescent
