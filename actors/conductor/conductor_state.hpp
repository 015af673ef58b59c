// State of the conductor and its handlers, split across files by concern.
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/common/recent_ids.hpp"
#include "actors/conductor/conductor.hpp"
#include "actors/conductor/policy.hpp"
#include "actors/conductor/prefix_index.hpp"
#include "actors/request/request_actor.hpp"

#include <caf/actor_clock.hpp>

#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

namespace crescent {

struct placed_request {
  uint32_t prefill = 0;
  uint32_t decode = 0;
  bool prefill_open = true; // counted in the prefill instance's queue
  request_actor requester;  // who asked: only it may say the request ended
};

/// A job placed on a prefill instance and not ended, as predicted.
struct queued_job {
  uint64_t request_id = 0;
  uint64_t occupancy_ns = 0;   // the instance is busy this long with it: loads to stores
  uint64_t compute_ns = 0;     // of which compute, checked against the report
  uint64_t compute_tokens = 0; // tokens it computes
  uint64_t pull_bytes = 0;     // read from another node first, when it pulls
  uint64_t pull_ns = 0;        // predicted, at the start of the job
  uint32_t pull_from = 0;
};

/// A prefill instance as the conductor predicts it: its jobs in order, the first one running
/// since the one before ended.
struct prefill_track {
  std::deque<queued_job> jobs;
  int64_t free_at_ns = 0;       // when the last job is predicted to end
  int64_t running_since_ns = 0; // when the first job started
  uint64_t queued_tokens = 0;
};

/// What a decode instance holds, as predicted, kept in the order the view shows it (by predicted
/// end, then tokens): a placement reads it as it is, without copying or sorting.
class decode_track {
 public:
  /// Adds a request, or replaces what it was predicted to hold.
  void add(uint64_t request_id, decode_load load);
  void remove(uint64_t request_id);
  std::span<const decode_load> loads() const { return loads_; }
  /// Cumulative tokens of loads() (decode_view::tokens_before).
  std::span<const uint64_t> tokens_before() const { return tokens_before_; }
  size_t size() const { return loads_.size(); }

 private:
  void sum_from(size_t first);

  std::vector<decode_load> loads_;
  std::vector<uint64_t> ids_;                 // of loads_, in the same order
  std::vector<uint64_t> tokens_before_ = {0}; // loads_.size() + 1 entries
};

/// Hand-off bursts on their way to a decode instance, as predicted at placement; one ends with
/// its request or its prefill report (its KV has landed by then), or at its predicted end.
/// At most one per request in flight.
class inbound_track {
 public:
  void add(uint64_t request_id, handoff_burst burst);
  void remove(uint64_t request_id);
  /// Drops those predicted to have ended by `now_ns`; the others, for the view.
  std::span<const handoff_burst> current(int64_t now_ns);

 private:
  std::vector<handoff_burst> bursts_;
  std::vector<uint64_t> ids_; // of bursts_, in the same order
};

struct conductor_state {
  static inline const char* name = "conductor";
  conductor_options options;
  prefix_index index;              // blocks in the nodes' DRAM
  prefix_index ssd_index;          // blocks on the nodes' SSD tiers (BlocksGone.offloaded)
  std::optional<time_model> model; // corrected online from prefill reports
  std::optional<scheduling_policy> policy;
  std::vector<prefill_track> prefill; // per prefill instance
  std::vector<decode_track> decode;   // per decode instance
  std::vector<inbound_track> inbound; // per decode instance
  uint64_t pulls = 0;                 // placements that pull a prefix from another node
  std::vector<caf::actor_clock::time_point> node_last_seen;
  // Each node's agent (from bring-up's watch_atom), watched: an agent that is gone (its process
  // died or became unreachable) takes its node out at once, not after the heartbeat timeout.
  // Heartbeats count only from a node's own agent.
  std::vector<caf::actor_addr> node_agent;
  std::vector<bool> node_gone;
  std::vector<bool> node_was_live; // as the last liveness check found them
  bool watching = false;
  std::unordered_map<uint64_t, placed_request> in_flight;
  // Every request placed, ended or not: a request asks once, so another ScheduleRequest is a
  // copy (a duplicate, or one held on the way). Placed after the request ended, it would hold
  // a prefill job and decode memory in the view that no report ever takes off.
  recent_ids placed_ids{conductor_recent_placements_max};
  uint64_t placed = 0;
  uint64_t rejected = 0;
  bad_message_counter bad;
};

using conductor_ptr = conductor_actor::stateful_pointer<conductor_state>;

caf::result<typed_envelope<wire::ScheduleReply>>
on_schedule(conductor_ptr self, const typed_envelope<wire::ScheduleRequest>& msg);
caf::result<void> on_prefill_report(conductor_ptr self,
                                    const typed_envelope<wire::PrefillReport>& msg);
caf::result<void> on_request_report(conductor_ptr self,
                                    const typed_envelope<wire::RequestReport>& msg);
caf::result<void> on_heartbeat(conductor_ptr self, const typed_envelope<wire::Heartbeat>& msg);
void on_blocks_gone(conductor_ptr self, const typed_envelope<wire::BlocksGone>& msg);
void on_watch(conductor_ptr self, const std::vector<caf::actor>& agents);
caf::result<void> on_rejoin(conductor_ptr self, uint32_t node, const caf::actor& agent);
/// Fails the requests placed on nodes that went silent or gone since the last check.
void check_liveness(conductor_ptr self);
bool node_alive(conductor_ptr self, uint32_t node);
bool node_alive(conductor_ptr self, uint32_t node, caf::actor_clock::time_point now);
int64_t now_ns(conductor_ptr self);
/// Ends a job at its prefill instance (reported, or its request ended): the next one starts now.
/// Ends a prefill job in the queue model; `store_ns`: how long it stored after leaving the
/// compute slot, which the next job ran beside.
void end_prefill_job(conductor_ptr self, uint32_t instance, uint64_t request_id,
                     uint64_t store_ns = 0);

} // namespace crescent
