#include "actors/conductor/conductor.hpp"

#include "actors/conductor/conductor_state.hpp"
#include "messages/schema/conductor.capnp.h"

#include <caf/stateful_actor.hpp>

#include <algorithm>
#include <cassert>

namespace crescent {

int64_t now_ns(conductor_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

bool node_alive(conductor_ptr self, uint32_t node, caf::actor_clock::time_point now) {
  auto& st = self->state;
  return !st.node_gone[node] && now - st.node_last_seen[node] <= st.options.heartbeat_timeout;
}

bool node_alive(conductor_ptr self, uint32_t node) {
  return node_alive(self, node, self->clock().now());
}

void decode_track::add(uint64_t request_id, decode_load load) {
  remove(request_id);
  auto at = std::upper_bound(
      loads_.begin(), loads_.end(), load, [](const decode_load& a, const decode_load& b) {
        return a.end_ns != b.end_ns ? a.end_ns < b.end_ns : a.tokens < b.tokens;
      });
  const auto first = static_cast<size_t>(at - loads_.begin());
  ids_.insert(ids_.begin() + static_cast<ptrdiff_t>(first), request_id);
  loads_.insert(at, load);
  sum_from(first);
}

void decode_track::remove(uint64_t request_id) {
  auto i = std::find(ids_.begin(), ids_.end(), request_id);
  if (i == ids_.end())
    return;
  const auto first = static_cast<size_t>(i - ids_.begin());
  loads_.erase(loads_.begin() + static_cast<ptrdiff_t>(first));
  ids_.erase(i);
  sum_from(first);
}

void decode_track::sum_from(size_t first) {
  tokens_before_.resize(loads_.size() + 1);
  for (size_t k = first; k < loads_.size(); ++k)
    tokens_before_[k + 1] = tokens_before_[k] + loads_[k].tokens;
}

void inbound_track::add(uint64_t request_id, handoff_burst burst) {
  remove(request_id);
  bursts_.push_back(burst);
  ids_.push_back(request_id);
}

void inbound_track::remove(uint64_t request_id) {
  auto i = std::find(ids_.begin(), ids_.end(), request_id);
  if (i == ids_.end())
    return;
  bursts_.erase(bursts_.begin() + (i - ids_.begin()));
  ids_.erase(i);
}

std::span<const handoff_burst> inbound_track::current(int64_t now_ns) {
  size_t kept = 0;
  for (size_t k = 0; k < bursts_.size(); ++k)
    if (bursts_[k].end_ns > now_ns) {
      bursts_[kept] = bursts_[k];
      ids_[kept++] = ids_[k];
    }
  bursts_.resize(kept);
  ids_.resize(kept);
  return bursts_;
}

namespace {

typed_envelope<wire::ConductorStats> make_stats(conductor_ptr self) {
  auto& st = self->state;
  const int64_t now = now_ns(self);
  uint32_t live = 0;
  for (uint32_t n = 0; n < st.node_last_seen.size(); ++n)
    live += node_alive(self, n) ? 1 : 0;
  return make_envelope<wire::ConductorStats>([&](wire::ConductorStats::Builder out) {
    out.setPlaced(st.placed);
    out.setRejected(st.rejected);
    out.setBadMessages(st.bad.count);
    out.setLiveNodes(live);
    out.setIndexedBlocks(st.index.size());
    out.setSsdIndexedBlocks(st.ssd_index.size());
    out.setRequestsInFlight(st.in_flight.size());
    auto q = out.initPrefillQueueJobs(static_cast<unsigned>(st.prefill.size()));
    for (unsigned i = 0; i < st.prefill.size(); ++i)
      q.set(i, static_cast<uint32_t>(st.prefill[i].jobs.size()));
    // The queue time a placement predicts for a job that arrives now (schedule.cpp's view).
    auto wait = out.initPrefillQueueNs(static_cast<unsigned>(st.prefill.size()));
    for (unsigned i = 0; i < st.prefill.size(); ++i)
      wait.set(i, static_cast<uint64_t>(std::max<int64_t>(0, st.prefill[i].free_at_ns - now)));
    auto a = out.initDecodeActive(static_cast<unsigned>(st.decode.size()));
    for (unsigned i = 0; i < st.decode.size(); ++i)
      a.set(i, static_cast<uint32_t>(st.decode[i].size()));
  });
}

conductor_actor::behavior_type conductor(conductor_ptr self, conductor_options options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.prefill.assign(st.options.prefill_node.size(), prefill_track{});
  st.decode.assign(st.options.decode_node.size(), {});
  st.inbound.assign(st.options.decode_node.size(), {});
  assert(st.options.model && "a conductor needs its time model");
  st.model = *st.options.model;
  st.policy.emplace(st.options.policy, st.options.seed);
  // Every node starts alive: its first heartbeat is due one interval after bring-up.
  st.node_last_seen.assign(st.options.nodes, self->clock().now());
  st.node_agent.assign(st.options.nodes, caf::actor_addr{});
  st.node_gone.assign(st.options.nodes, false);
  keep_serving_on_errors(self);
  self->set_down_handler([=](caf::down_msg& down) {
    auto& s = self->state;
    for (uint32_t n = 0; n < s.node_agent.size(); ++n)
      if (s.node_agent[n] == down.source)
        s.node_gone[n] = true; // until a rejoin hands over its new agent (on_rejoin)
  });
  return {
      [=](schedule_atom, const typed_envelope<wire::ScheduleRequest>& msg) {
        return on_schedule(self, msg);
      },
      [=](report_atom, const typed_envelope<wire::PrefillReport>& msg) {
        return on_prefill_report(self, msg);
      },
      [=](finished_atom, const typed_envelope<wire::RequestReport>& msg) {
        return on_request_report(self, msg);
      },
      [=](heartbeat_atom, const typed_envelope<wire::Heartbeat>& msg) {
        return on_heartbeat(self, msg);
      },
      [=](evicted_atom, const typed_envelope<wire::BlocksGone>& msg) { on_blocks_gone(self, msg); },
      [=](watch_atom, const std::vector<caf::actor>& agents) { on_watch(self, agents); },
      [=](watch_atom, uint32_t node, const caf::actor& agent) {
        return on_rejoin(self, node, agent);
      },
      [=](stats_atom) { return make_stats(self); },
      [=](tick_atom) {
        if (refuse_unless_self_sent(self, "tick"))
          return;
        check_liveness(self);
        self->delayed_send(self, self->state.options.liveness_check, tick_atom::value);
      },
  };
}

} // namespace

conductor_actor spawn_conductor(caf::actor_system& sys, conductor_options options) {
  return sys.spawn(conductor, std::move(options));
}

} // namespace crescent
