// State of a node agent; heartbeats and watching (node_agent.cpp), joins of hosted nodes
// (join.cpp).
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/conductor/conductor_actor.hpp"
#include "actors/node_agent/node_agent.hpp"

#include <chrono>
#include <memory>
#include <optional>

namespace crescent {

struct node_agent_state {
  static inline const char* name = "node_agent";
  uint32_t node = 0;
  std::chrono::milliseconds interval{1000};
  directory_ref dir;                 // embedded clusters; null for hosted nodes
  std::optional<hosted_node> hosted; // hosted nodes only
  conductor_actor conductor;         // from dir at start, or from the join
  bool joined = false;
  uint32_t directories = 0; // directory messages taken: bring-up's, then one per rejoin
  uint64_t sequence = 0;
  bool started = false;
  bool healthy = true;
  bad_message_counter bad;
};

using node_agent_ptr = node_agent_actor::stateful_pointer<node_agent_state>;

// join.cpp
caf::result<typed_envelope<wire::NodeWelcome>, caf::actor, std::vector<caf::actor>,
            std::vector<caf::actor>>
on_join(node_agent_ptr self, const typed_envelope<wire::NodeJoin>& msg, caf::actor conductor,
        caf::actor master);
// directory.cpp
caf::result<void> on_directory(node_agent_ptr self,
                               const typed_envelope<wire::ClusterDirectory>& msg,
                               const std::vector<caf::actor>& decode,
                               const std::vector<caf::actor>& prefill);

} // namespace crescent
