// The node agent: membership and liveness of one node. It watches the node's actors and sends
// the conductor a heartbeat every interval while all of them live. When one dies it stops, so
// the conductor stops placing work on the node within its heartbeat timeout.
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/node_agent/node_agent_actor.hpp"

#include <caf/actor_control_block.hpp>
#include <caf/actor_system.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace crescent {

node_agent_actor spawn_node_agent(caf::actor_system& sys, uint32_t node,
                                  std::chrono::milliseconds interval,
                                  std::vector<caf::strong_actor_ptr> watched,
                                  std::shared_ptr<const directory> dir);

} // namespace crescent
