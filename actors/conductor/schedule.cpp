// Placement of a request: the policy over the conductor's view of load, cache and liveness
// (docs/scheduling.md), and the bookkeeping of what it predicts.
#include "actors/conductor/conductor_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"

#include <caf/stateful_actor.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace crescent {

namespace {

constexpr size_t schedule_keys_max = 1u << 16;
constexpr size_t avoid_instances_max = 64;

struct schedule_args {
  uint64_t request_id = 0;
  uint32_t prompt_tokens = 0;
  uint32_t max_new_tokens = 0;
  std::vector<block_key> keys;
  std::vector<uint32_t> avoid_prefill; // a failed attempt's instances: placed elsewhere
  std::vector<uint32_t> avoid_decode;
};

typed_envelope<wire::ScheduleReply> reply_rejected(uint64_t id, const std::string& reason,
                                                   uint64_t retry_after_ms) {
  return make_envelope<wire::ScheduleReply>([&](wire::ScheduleReply::Builder out) {
    out.setRequestId(id);
    out.setRejected(reason);
    out.setRetryAfterMs(retry_after_ms);
  });
}

typed_envelope<wire::ScheduleReply> reply_placed(uint64_t id, const decision& d) {
  return make_envelope<wire::ScheduleReply>([&](wire::ScheduleReply::Builder out) {
    out.setRequestId(id);
    auto placed = out.initPlaced();
    placed.setPrefillInstance(d.prefill);
    placed.setDecodeInstance(d.decode);
    placed.setCachedBlocks(d.local_blocks);
    placed.setReuseBlocks(d.reuse_blocks);
    placed.setPull(d.pull);
    placed.setPredictedTtftNs(d.predicted_ttft_ns);
    placed.setPredictedTbtNs(d.predicted_tbt_ns);
  });
}

caf::expected<schedule_args> read_args(const typed_envelope<wire::ScheduleRequest>& msg) {
  return read_as<wire::ScheduleRequest>(msg, [](wire::ScheduleRequest::Reader in) {
    auto keys = in.getBlockKeys();
    if (keys.size() > schedule_keys_max)
      return caf::expected<schedule_args>{
          make_error(errc::limit_exceeded, "schedule request with over 65536 block keys")};
    if (in.getAvoidPrefill().size() > avoid_instances_max ||
        in.getAvoidDecode().size() > avoid_instances_max)
      return caf::expected<schedule_args>{make_error(
          errc::limit_exceeded, "schedule request avoiding over 64 instances of a kind")};
    return caf::expected<schedule_args>{
        schedule_args{in.getRequestId(), in.getPromptTokens(), in.getMaxNewTokens(), to_keys(keys),
                      to_vector(in.getAvoidPrefill()), to_vector(in.getAvoidDecode())}};
  });
}

// The instances a failed attempt used take no part in this placement: they count as down.
template <class View>
caf::error avoid(const std::vector<uint32_t>& instances, std::vector<View>& views,
                 const char* kind) {
  for (auto i : instances) {
    if (i >= views.size())
      return make_error(
          errc::invalid_argument,
          fmt::format("schedule request avoids {} instance {} of {}", kind, i, views.size()));
    views[i].alive = false;
  }
  return {};
}

// The view the policy decides on (its spans point into `prefill`, `decode` and the state).
// Bytes each node is still serving to running jobs' pulls, as predicted: a job's pull comes
// first, so it is in flight from the job's start for its predicted time, draining evenly.
void pull_backlog(conductor_ptr self, int64_t now, std::vector<uint64_t>& out) {
  auto& st = self->state;
  out.assign(st.options.nodes, 0);
  for (const auto& t : st.prefill) {
    if (t.jobs.empty() || t.jobs.front().pull_bytes == 0)
      continue;
    const auto& j = t.jobs.front();
    const auto elapsed = static_cast<uint64_t>(std::max<int64_t>(0, now - t.running_since_ns));
    if (elapsed >= j.pull_ns || j.pull_from >= out.size())
      continue;
    out[j.pull_from] += static_cast<uint64_t>(static_cast<double>(j.pull_bytes) *
                                              static_cast<double>(j.pull_ns - elapsed) /
                                              static_cast<double>(j.pull_ns));
  }
}

schedule_view make_view(conductor_ptr self, std::vector<prefill_view>& prefill,
                        std::vector<decode_view>& decode, std::vector<uint64_t>& backlog) {
  auto& st = self->state;
  const auto clock_now = self->clock().now(); // read once: a clock read per node adds up
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_now.time_since_epoch()).count();
  const uint32_t group = std::max<uint32_t>(1, st.options.prefill_group);
  for (uint32_t i = 0; i < st.prefill.size(); ++i) {
    const auto& t = st.prefill[i];
    const auto node = st.options.prefill_node[i];
    // A group is one instance, its first, alive while all of its nodes are; the others take
    // no jobs of their own.
    bool alive = i % group == 0;
    for (uint32_t k = 0; alive && k < group && i + k < st.prefill.size(); ++k)
      alive = node_alive(self, st.options.prefill_node[i + k], clock_now);
    prefill.push_back({node, alive, static_cast<uint32_t>(t.jobs.size()), t.queued_tokens,
                       static_cast<uint64_t>(std::max<int64_t>(0, t.free_at_ns - now))});
  }
  for (uint32_t i = 0; i < st.decode.size(); ++i) {
    const auto node = st.options.decode_node[i];
    decode.push_back({node, node_alive(self, node, clock_now), st.options.decode_capacity_tokens,
                      st.decode[i].loads(), st.decode[i].tokens_before(),
                      st.inbound[i].current(now)});
  }
  pull_backlog(self, now, backlog);
  schedule_view v;
  v.now_ns = now;
  v.pull_backlog_bytes = backlog;
  v.prefill = prefill;
  v.decode = decode;
  v.index = &st.index;
  v.ssd_index = &st.ssd_index;
  v.model = &*st.model;
  v.slo = st.options.slo;
  v.admission = st.options.admission;
  v.kvcache_balancing_threshold = st.options.kvcache_balancing_threshold;
  v.decode_tbt_slack = st.options.decode_tbt_slack;
  v.prefill_queue_max = st.options.prefill_queue_max;
  v.block_tokens = st.options.block_tokens;
  v.coupled = st.options.coupled;
  return v;
}

// What a placed request is predicted to do: its prefill job holds the instance from its loads
// to its hand-off (its stores run beside the next job), and its decode holds KV memory until its
// last token.
void record(conductor_ptr self, const schedule_view& v, const schedule_args& a, const decision& d) {
  auto& st = self->state;
  const auto& m = *st.model;
  const uint32_t reused =
      reused_tokens(v, {a.prompt_tokens, a.max_new_tokens, a.keys}, d.reuse_blocks);
  queued_job job;
  job.request_id = a.request_id;
  job.compute_ns = m.prefill_ns(a.prompt_tokens, reused);
  job.compute_tokens = a.prompt_tokens - reused;
  const uint32_t pulled = d.reuse_blocks - d.local_blocks;
  const auto node = v.prefill[d.prefill].node;
  if (d.pull && pulled > 0) {
    job.pull_from = d.pull_from;
    job.pull_bytes = uint64_t{pulled} * m.pool_block_bytes();
    job.pull_ns = m.pull_ns(pulled, d.pull_from, node, 0);
  }
  // The store of new blocks runs beside the next job: it does not hold the compute slot.
  const uint64_t load_ns = m.load_ns(d.local_blocks, false) + job.pull_ns;
  job.occupancy_ns = load_ns + job.compute_ns +
                     m.handoff_ns(a.prompt_tokens, job.compute_ns, load_ns,
                                  d.pull ? d.reuse_blocks : d.local_blocks);
  auto& t = st.prefill[d.prefill];
  if (t.jobs.empty())
    t.running_since_ns = v.now_ns; // an idle instance starts it at once
  t.free_at_ns = std::max(t.free_at_ns, v.now_ns) + static_cast<int64_t>(job.occupancy_ns);
  t.queued_tokens += job.compute_tokens;
  t.jobs.push_back(job);
  const int64_t decode_end = v.now_ns + static_cast<int64_t>(d.predicted_ttft_ns) +
                             static_cast<int64_t>(uint64_t{a.max_new_tokens} * d.predicted_tbt_ns);
  st.decode[d.decode].add(a.request_id,
                          decode_load{uint64_t{a.prompt_tokens} + a.max_new_tokens, decode_end});
  if (d.handoff_burst_ns > 0)
    st.inbound[d.decode].add(
        a.request_id, handoff_burst::ending_at(v.now_ns + static_cast<int64_t>(d.predicted_ttft_ns),
                                               d.handoff_burst_ns));
  st.in_flight.emplace(a.request_id,
                       placed_request{d.prefill, d.decode, true,
                                      caf::actor_cast<request_actor>(self->current_sender())});
  st.pulls += d.pull && d.reuse_blocks > d.local_blocks ? 1 : 0;
}

} // namespace

caf::result<typed_envelope<wire::ScheduleReply>>
on_schedule(conductor_ptr self, const typed_envelope<wire::ScheduleRequest>& msg) {
  auto& st = self->state;
  auto args = read_args(msg);
  if (!args)
    return st.bad.refuse(st.name, std::move(args.error()));
  if (args->prompt_tokens == 0)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument, "empty prompt"));
  // A copy of a placement made (the network's doing, not a bad message): the request has its
  // answer, or had it.
  if (st.in_flight.count(args->request_id) != 0 || st.placed_ids.contains(args->request_id))
    return make_error(errc::already_exists,
                      "request " + std::to_string(args->request_id) + " was placed already");
  if (st.in_flight.size() >= st.options.requests_in_flight_max) {
    ++st.rejected;
    return reply_rejected(args->request_id, "too many requests in flight", 1000);
  }
  std::vector<prefill_view> prefill;
  std::vector<decode_view> decode;
  prefill.reserve(st.prefill.size());
  decode.reserve(st.decode.size());
  std::vector<uint64_t> backlog;
  const auto v = make_view(self, prefill, decode, backlog);
  for (auto err : {avoid(args->avoid_prefill, prefill, "prefill"),
                   avoid(args->avoid_decode, decode, "decode")})
    if (err)
      return st.bad.refuse(st.name, std::move(err));
  const auto d = st.policy->place(v, {args->prompt_tokens, args->max_new_tokens, args->keys});
  if (!d.placed) {
    ++st.rejected;
    return reply_rejected(args->request_id, d.reason, d.retry_after_ms);
  }
  ++st.placed;
  st.placed_ids.insert(args->request_id);
  record(self, v, *args, d);
  return reply_placed(args->request_id, d);
}

} // namespace crescent
