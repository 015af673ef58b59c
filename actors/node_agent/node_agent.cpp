#include "actors/node_agent/node_agent.hpp"

#include "actors/common/timeouts.hpp"
#include "messages/errors.hpp"
#include "messages/schema/conductor.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

struct node_agent_state {
  static inline const char* name = "node_agent";
  uint32_t node = 0;
  std::chrono::milliseconds interval{1000};
  std::shared_ptr<const directory> dir;
  uint64_t sequence = 0;
  bool started = false;
  bool healthy = true;
};

using self_ptr = node_agent_actor::stateful_pointer<node_agent_state>;

void beat(self_ptr self) {
  auto& st = self->state;
  if (!st.healthy)
    return;
  auto msg = make_envelope<wire::Heartbeat>([&](wire::Heartbeat::Builder out) {
    out.setNode(st.node);
    out.setSequence(++st.sequence);
  });
  self->request(st.dir->conductor, control_timeout, heartbeat_atom::value, msg)
      .then([] {},
            [node = st.node](caf::error& err) {
              spdlog::warn("node_agent {}: heartbeat not acknowledged: {}", node, describe(err));
            });
  self->delayed_send(self, st.interval, tick_atom::value);
}

node_agent_actor::behavior_type node_agent(self_ptr self, uint32_t node,
                                           std::chrono::milliseconds interval,
                                           std::vector<caf::strong_actor_ptr> watched,
                                           std::shared_ptr<const directory> dir) {
  auto& st = self->state;
  st.node = node;
  st.interval = interval;
  st.dir = std::move(dir);
  for (auto& w : watched)
    self->monitor(w);
  self->set_down_handler([=](caf::down_msg& down) {
    spdlog::error("node_agent {}: an actor of this node stopped ({}); node leaves the cluster",
                  self->state.node, caf::to_string(down.reason));
    self->state.healthy = false;
  });
  return {
      [=](start_atom) {
        if (!self->state.started) {
          self->state.started = true;
          beat(self);
        }
      },
      [=](tick_atom) { beat(self); },
  };
}

} // namespace

node_agent_actor spawn_node_agent(caf::actor_system& sys, uint32_t node,
                                  std::chrono::milliseconds interval,
                                  std::vector<caf::strong_actor_ptr> watched,
                                  std::shared_ptr<const directory> dir) {
  return sys.spawn(node_agent, node, interval, std::move(watched), std::move(dir));
}

} // namespace crescent
