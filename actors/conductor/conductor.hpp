// The conductor: places requests and keeps the load and cache view that placement needs.
#pragma once

#include "actors/conductor/conductor_actor.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace crescent {

struct conductor_options {
  uint32_t nodes = 0;
  std::vector<uint32_t> prefill_node; // node of each prefill instance
  std::vector<uint32_t> decode_node;  // node of each decode instance
  uint32_t prefill_queue_max = 256;   // jobs per prefill instance
  std::chrono::milliseconds heartbeat_timeout{5000};
  size_t requests_in_flight_max = 1u << 20;
};

conductor_actor spawn_conductor(caf::actor_system& sys, conductor_options options);

} // namespace crescent
