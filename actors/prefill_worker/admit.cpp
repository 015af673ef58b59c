// Admission of prefill jobs: decode, check every field against the model and the limits, queue;
// and their cancellation, when their request ends early (its client went away).
#include "actors/common/code_probe.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/worker.capnp.h"
#include "storage/block_key.hpp"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>

#include <algorithm>

namespace crescent {

namespace {

caf::expected<prefill_job> decode_job(const typed_envelope<wire::PrefillJob>& msg,
                                      const gpu::model_config& model) {
  return read_as<wire::PrefillJob>(msg, [&](wire::PrefillJob::Reader in) {
    auto tokens = in.getTokens();
    auto keys = in.getBlockKeys();
    auto pages = in.getDecodePages();
    if (tokens.size() == 0 || tokens.size() > model.context_tokens_max)
      return caf::expected<prefill_job>{
          make_error(errc::limit_exceeded, "prompt of " + std::to_string(tokens.size()) +
                                               " tokens is outside [1, " +
                                               std::to_string(model.context_tokens_max) + "]")};
    const size_t page_count = (tokens.size() + model.block_tokens - 1) / model.block_tokens;
    if (pages.size() != page_count || keys.size() != page_count)
      return caf::expected<prefill_job>{
          make_error(errc::invalid_argument, "a prompt of " + std::to_string(tokens.size()) +
                                                 " tokens needs " + std::to_string(page_count) +
                                                 " decode pages and one key per block")};
    if (in.getKvSend() > wire::KvSend::STREAM)
      return caf::expected<prefill_job>{
          make_error(errc::invalid_argument, "kvSend must be config, after or stream")};
    prefill_job job;
    job.request_id = in.getRequestId();
    job.tokens = to_vector(tokens);
    job.keys = to_keys(keys);
    job.decode_instance = in.getDecodeInstance();
    job.pull = in.getPull();
    job.kv_send = in.getKvSend();
    for (auto p : pages)
      job.decode_pages.push_back(transport::from_wire(p));
    return caf::expected<prefill_job>{std::move(job)};
  });
}

caf::error check_job(const prefill_job& job, const prefill_state& st) {
  const auto& model = st.parts.engine->config();
  if (auto err = check_prompt(st, job.tokens, job.decode_instance, job.decode_pages))
    return err;
  // Keys name pool blocks: a wrong key would file this prompt's KV under another prefix.
  auto expected = storage::chain_block_keys(job.tokens, model.block_tokens, model.key_root());
  if (expected != job.keys)
    return make_error(errc::invalid_argument, "block keys do not match the prompt's tokens");
  return caf::none;
}

} // namespace

caf::error refuse_if_taken(const prefill_state& st, uint64_t request_id, const char* role) {
  if (!st.recent_jobs.contains(request_id))
    return caf::none;
  return make_error(errc::already_exists,
                    std::string{"prefill "} + role + " " + std::to_string(st.options.instance) +
                        " has taken the job of request " + std::to_string(request_id) + " already");
}

void remember_early_cancel(prefill_state& st, uint64_t request_id, caf::actor_addr from) {
  for (const auto& c : st.early_cancels)
    if (c.request_id == request_id && c.from == from)
      return; // a copy
  if (st.early_cancels.size() >= prefill_early_cancels_max)
    st.early_cancels.pop_front();
  st.early_cancels.push_back({request_id, std::move(from)});
}

caf::error refuse_if_cancelled(prefill_ptr self, uint64_t request_id,
                               const caf::actor_addr& requester) {
  auto& st = self->state;
  // Only the job's requester or the conductor may have cancelled it (as on_cancel_job checks
  // for a job it holds): anyone else's cancel is not a reason to refuse.
  auto it = std::find_if(st.early_cancels.begin(), st.early_cancels.end(), [&](const auto& c) {
    return c.request_id == request_id &&
           (c.from == requester || c.from == st.parts.dir->conductor.address());
  });
  if (it == st.early_cancels.end())
    return caf::none;
  st.early_cancels.erase(it);
  st.recent_jobs.insert(request_id); // a later copy is refused as taken
  CRESCENT_PROBE("prefill.job_after_its_cancel");
  return make_error(errc::cancelled, "request " + std::to_string(request_id) +
                                         " cancelled its prefill job before the job came");
}

caf::error check_prompt(const prefill_state& st, const std::vector<uint32_t>& tokens,
                        uint32_t decode_instance,
                        const std::vector<transport::region_handle>& pages) {
  const auto& model = st.parts.engine->config();
  for (auto t : tokens)
    if (t >= model.vocab)
      return make_error(errc::invalid_argument,
                        "token id " + std::to_string(t) + " is outside the vocabulary");
  if (decode_instance >= st.parts.dir->decode.size())
    return make_error(errc::invalid_argument,
                      "no decode instance " + std::to_string(decode_instance));
  for (const auto& p : pages)
    if (p.length != st.parts.engine->page_memory_bytes())
      return make_error(errc::invalid_argument,
                        "page " + transport::to_string(p) + " is not one KV page long");
  return caf::none;
}

caf::result<typed_envelope<wire::PrefillAccepted>>
on_prefill_job(prefill_ptr self, const typed_envelope<wire::PrefillJob>& msg) {
  auto& st = self->state;
  if (st.options.group_instances > 1 && stage_index(st) != 0)
    return st.bad.refuse(st.name,
                         make_error(errc::invalid_argument,
                                    "prefill instance " + std::to_string(st.options.instance) +
                                        " is a stage of a group: jobs go to instance " +
                                        std::to_string(group_head(st))));
  auto job = decode_job(msg, st.parts.engine->config());
  if (!job)
    return st.bad.refuse(st.name, std::move(job.error()));
  if (auto err = check_job(*job, st))
    return st.bad.refuse(st.name, std::move(err));
  job->requester = caf::actor_cast<request_actor>(self->current_sender());
  if (!job->requester)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "a prefill job needs a requester to report to"));
  // The refusal answers a request that has the first copy's answer already: dropped there.
  if (auto err = refuse_if_taken(st, job->request_id, "instance"))
    return err;
  if (auto err = refuse_if_cancelled(self, job->request_id, job->requester.address()))
    return err;
  if (st.queue.size() >= st.options.queue_jobs_max)
    return make_error(errc::no_space, "prefill queue of instance " +
                                          std::to_string(st.options.instance) + " is full");
  st.recent_jobs.insert(job->request_id);
  self->monitor(job->requester);
  const auto ahead = static_cast<uint32_t>(st.queue.size() + (st.current ? 1 : 0));
  const auto id = job->request_id;
  job->accepted_ns = clock_ns(self);
  st.queue.push_back(std::move(*job));
  if (!st.current)
    start_next_job(self);
  return make_envelope<wire::PrefillAccepted>([&](wire::PrefillAccepted::Builder out) {
    out.setRequestId(id);
    out.setQueuedJobs(ahead);
  });
}

void on_cancel_job(prefill_ptr self, const typed_envelope<wire::ReleaseRequest>& msg) {
  auto& st = self->state;
  auto id = read_as<wire::ReleaseRequest>(
      msg, [](wire::ReleaseRequest::Reader in) { return in.getRequestId(); });
  if (!id) {
    st.bad.refuse(st.name, std::move(id.error()));
    return;
  }
  // The request that sent the job may cancel it, and the conductor; nobody else.
  auto entitled = [&](const prefill_job& job) {
    return sent_by(self, job.requester.address()) ||
           sent_by(self, st.parts.dir->conductor.address());
  };
  auto refuse = [&] {
    st.bad.refuse(st.name, make_error(errc::access_denied,
                                      "a cancel of request " + std::to_string(*id) +
                                          "'s job comes only from that request or the conductor"));
  };
  auto queued = std::find_if(st.queue.begin(), st.queue.end(),
                             [&](const prefill_job& j) { return j.request_id == *id; });
  if (queued != st.queue.end()) {
    if (!entitled(*queued))
      return refuse();
    st.queue.erase(queued); // it holds nothing yet
    return;
  }
  if (!st.current || st.current->request_id != *id) {
    // Ended already, or storing (its KV is with decode and its blocks go to the pool); or
    // not come yet, and remembered in case it comes.
    if (!st.recent_jobs.contains(*id))
      remember_early_cancel(st, *id, caf::actor_cast<caf::actor_addr>(self->current_sender()));
    return;
  }
  if (!entitled(*st.current))
    return refuse();
  cancel_current_job(self);
}

void cancel_current_job(prefill_ptr self) {
  auto& job = *self->state.current;
  if (job.signalled)
    return; // its KV is with decode: it goes on to store its blocks
  job.cancelled = true;
  // Ends now if nothing that uses its pages is in flight (it waits for the store master's
  // answer, which is then dropped), else where the last of those comes back.
  end_if_cancelled(self);
}

} // namespace crescent
