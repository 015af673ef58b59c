// Jobs in and out of a coupled instance: intake into the waiting queue, release by the request,
// and drops and failures from any stage.
#include "actors/common/next_step.hpp"
#include "actors/coupled_worker/coupled_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>

#include <algorithm>

namespace crescent {

namespace {

constexpr size_t job_keys_max = 1u << 16;

struct job_args {
  uint64_t request_id = 0;
  std::vector<uint32_t> tokens;
  std::vector<block_key> keys;
  uint32_t max_new_tokens = 0;
};

caf::expected<job_args> read_job(const typed_envelope<wire::CoupledJob>& msg) {
  return read_as<wire::CoupledJob>(msg, [](wire::CoupledJob::Reader in) {
    if (in.getBlockKeys().size() > job_keys_max)
      return caf::expected<job_args>{
          make_error(errc::limit_exceeded, "a coupled job with over 65536 block keys")};
    return caf::expected<job_args>{job_args{in.getRequestId(), to_vector(in.getTokens()),
                                            to_keys(in.getBlockKeys()), in.getMaxNewTokens()}};
  });
}

uint32_t pages_for(const coupled_state& st, uint64_t prompt_tokens, uint32_t max_new_tokens) {
  // The last output token is never fed back, so its KV needs no room.
  const uint64_t positions = prompt_tokens + max_new_tokens - 1;
  const uint32_t block = st.parts.engine->config().block_tokens;
  return static_cast<uint32_t>((positions + block - 1) / block);
}

// The checks a job takes before it may wait: a prompt of known tokens with one key per block,
// some output, and a size the instance could ever hold.
caf::error check_job(const coupled_state& st, const job_args& a) {
  const auto& cfg = st.parts.engine->config();
  if (a.tokens.empty() || a.max_new_tokens == 0)
    return make_error(errc::invalid_argument, "a request needs a prompt and at least one output");
  if (a.tokens.size() + a.max_new_tokens > cfg.context_tokens_max)
    return make_error(errc::limit_exceeded, "prompt + output of " +
                                                std::to_string(a.tokens.size() + a.max_new_tokens) +
                                                " tokens exceeds the context limit of " +
                                                std::to_string(cfg.context_tokens_max));
  if (std::any_of(a.tokens.begin(), a.tokens.end(), [&](uint32_t t) { return t >= cfg.vocab; }))
    return make_error(errc::invalid_argument, "a token id is outside the vocabulary");
  if (a.keys.size() != (a.tokens.size() + cfg.block_tokens - 1) / cfg.block_tokens)
    return make_error(errc::invalid_argument, "a coupled job needs one key per prompt block");
  if (pages_for(st, a.tokens.size(), a.max_new_tokens) > st.cache->capacity())
    return make_error(errc::limit_exceeded,
                      "coupled instance " + std::to_string(st.options.instance) + " has " +
                          std::to_string(st.cache->capacity()) + " KV pages in all, fewer than " +
                          "the request needs");
  return caf::none;
}

// The request's sequence here, waiting or running; null where the instance holds none.
const coupled_seq* find_seq(const coupled_state& st, uint64_t id) {
  if (auto i = st.running.find(id); i != st.running.end())
    return &i->second;
  for (const auto& s : st.waiting)
    if (s.request_id == id)
      return &s;
  return nullptr;
}

} // namespace

caf::result<typed_envelope<wire::PrefillAccepted>>
on_coupled_job(coupled_ptr self, const typed_envelope<wire::CoupledJob>& msg) {
  auto& st = self->state;
  auto a = read_job(msg);
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  if (auto err = check_job(st, *a))
    return st.bad.refuse(st.name, std::move(err));
  // A copy of a job taken already: the network's doing, not a bad message.
  if (find_seq(st, a->request_id) || st.taken.contains(a->request_id))
    return make_error(errc::already_exists, "coupled instance " +
                                                std::to_string(st.options.instance) +
                                                " has taken the job of request " +
                                                std::to_string(a->request_id) + " already");
  auto requester = caf::actor_cast<request_actor>(self->current_sender());
  if (!requester)
    return st.bad.refuse(st.name,
                         make_error(errc::invalid_argument, "a coupled job needs its requester"));
  if (st.waiting.size() >= st.options.queue_jobs_max)
    return make_error(errc::no_space, "coupled instance " + std::to_string(st.options.instance) +
                                          " has " + std::to_string(st.waiting.size()) +
                                          " requests waiting, its limit");
  st.taken.insert(a->request_id);
  // A request that ends without releasing (it crashed, its process died) must not hold pages.
  self->monitor(requester);
  coupled_seq s;
  s.request_id = a->request_id;
  s.requester = std::move(requester);
  s.tokens = std::move(a->tokens);
  s.keys = std::move(a->keys);
  s.max_new_tokens = a->max_new_tokens;
  s.accepted_ns = clock_ns(self);
  const auto ahead = static_cast<uint32_t>(st.waiting.size());
  st.waiting.push_back(std::move(s));
  wake(self);
  return make_envelope<wire::PrefillAccepted>([&](wire::PrefillAccepted::Builder out) {
    out.setRequestId(a->request_id);
    out.setQueuedJobs(ahead);
  });
}

caf::result<void> on_release(coupled_ptr self, const typed_envelope<wire::ReleaseRequest>& msg) {
  auto& st = self->state;
  auto id = read_as<wire::ReleaseRequest>(
      msg, [](wire::ReleaseRequest::Reader in) { return in.getRequestId(); });
  if (!id)
    return st.bad.refuse(st.name, std::move(id.error()));
  const auto* s = find_seq(st, *id);
  if (!s)
    return caf::unit; // releasing twice, or after the end, is harmless
  // Only the request that sent the job may take it back.
  if (auto err =
          refuse_unless_sent_by(self, s->requester.address(),
                                "the release of request " + std::to_string(*id), "its requester"))
    return err;
  drop_request(self, *id);
  wake(self); // its pages may let a waiting request in
  return caf::unit;
}

caf::result<typed_envelope<wire::JobProbeReply>>
on_probe(coupled_ptr self, const typed_envelope<wire::JobProbe>& msg) {
  auto& st = self->state;
  auto id =
      read_as<wire::JobProbe>(msg, [](wire::JobProbe::Reader in) { return in.getRequestId(); });
  if (!id)
    return st.bad.refuse(st.name, std::move(id.error()));
  const auto* s = find_seq(st, *id);
  // How far a job has got is its requester's business (a job no longer here tells nothing).
  if (s)
    if (auto err =
            refuse_unless_sent_by(self, s->requester.address(),
                                  "a probe of request " + std::to_string(*id), "its requester"))
      return err;
  return make_envelope<wire::JobProbeReply>([&](wire::JobProbeReply::Builder out) {
    out.setRequestId(*id);
    out.setHeld(s != nullptr);
    out.setSentTokens(s ? s->sent : 0);
  });
}

void drop_request(coupled_ptr self, uint64_t request_id) {
  auto& st = self->state;
  std::erase_if(st.waiting, [&](const coupled_seq& s) { return s.request_id == request_id; });
  auto i = st.running.find(request_id);
  if (i == st.running.end())
    return;
  st.cache->release(i->second.pages);
  st.running.erase(i);
  std::erase(st.prefilling, request_id);
  std::erase(st.decoding, request_id);
}

void fail_request(coupled_ptr self, uint64_t request_id, const std::string& reason) {
  auto& st = self->state;
  if (const auto* s = find_seq(st, request_id)) {
    const auto to = s->requester;
    auto msg = make_envelope<wire::RequestFailed>([&](wire::RequestFailed::Builder f) {
      f.setRequestId(request_id);
      f.setReason(reason);
    });
    self->send(to, failed_atom::value, msg);
  }
  drop_request(self, request_id);
}

void wake(coupled_ptr self, uint64_t after_ns) {
  auto& st = self->state;
  if (st.stepping)
    return;
  st.stepping = true;
  send_next_step(self, st.options.simulated_time, after_ns);
}

typed_envelope<wire::WorkerStats> make_stats(coupled_ptr self) {
  auto& st = self->state;
  return make_envelope<wire::WorkerStats>([&](wire::WorkerStats::Builder out) {
    out.setInstance(st.options.instance);
    out.setQueuedJobs(static_cast<uint32_t>(st.waiting.size()));
    out.setActiveRequests(static_cast<uint32_t>(st.running.size()));
    out.setFreePages(st.cache->available());
    out.setBadMessages(st.bad.count);
    out.setComputeNs(st.compute_ns_total);
  });
}

} // namespace crescent
