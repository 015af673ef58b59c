// State of the conductor and its handlers, split across files by concern.
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/conductor/conductor.hpp"
#include "actors/conductor/prefix_index.hpp"

#include <caf/actor_clock.hpp>

#include <unordered_map>
#include <vector>

namespace crescent {

struct placed_request {
  uint32_t prefill = 0;
  uint32_t decode = 0;
  bool prefill_open = true; // counted in the prefill instance's queue
};

struct conductor_state {
  static inline const char* name = "conductor";
  conductor_options options;
  prefix_index index;
  std::vector<uint32_t> prefill_queued; // per prefill instance
  std::vector<uint32_t> decode_active;  // per decode instance
  std::vector<caf::actor_clock::time_point> node_last_seen;
  // Each node's agent (from bring-up's watch_atom), watched: an agent that is gone (its process
  // died or became unreachable) takes its node out at once, not after the heartbeat timeout.
  // Heartbeats count only from a node's own agent.
  std::vector<caf::actor_addr> node_agent;
  std::vector<bool> node_gone;
  bool watching = false;
  std::unordered_map<uint64_t, placed_request> in_flight;
  uint64_t placed = 0;
  uint64_t rejected = 0;
  bad_message_counter bad;
};

using conductor_ptr = conductor_actor::stateful_pointer<conductor_state>;

caf::result<envelope> on_schedule(conductor_ptr self, const envelope& msg);
caf::result<void> on_prefill_report(conductor_ptr self, const envelope& msg);
caf::result<void> on_request_report(conductor_ptr self, const envelope& msg);
caf::result<void> on_heartbeat(conductor_ptr self, const envelope& msg);
void on_watch(conductor_ptr self, const std::vector<caf::actor>& agents);
bool node_alive(conductor_ptr self, uint32_t node);

} // namespace crescent
