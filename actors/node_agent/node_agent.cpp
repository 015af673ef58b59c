#include "actors/node_agent/node_agent.hpp"

#include "actors/common/timeouts.hpp"
#include "actors/node_agent/node_agent_state.hpp"
#include "messages/errors.hpp"
#include "messages/schema/conductor.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

void beat(node_agent_ptr self) {
  auto& st = self->state;
  if (!st.healthy)
    return;
  auto msg = make_envelope<wire::Heartbeat>([&](wire::Heartbeat::Builder out) {
    out.setNode(st.node);
    out.setSequence(++st.sequence);
  });
  self->request(st.conductor, control_timeout, heartbeat_atom::value, msg)
      .then([] {},
            [node = st.node](caf::error& err) {
              spdlog::warn("node_agent {}: heartbeat not acknowledged: {}", node, describe(err));
            });
  self->delayed_send(self, st.interval, tick_atom::value);
}

void on_down(node_agent_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  if (st.conductor && down.source == st.conductor.address()) {
    // Only hosted nodes watch the conductor: their cluster is gone, or out of reach. The
    // process reads which from the reason (node_command: it may wait to be taken back).
    spdlog::warn("node_agent {}: the cluster's main process went away ({}); leaving", st.node,
                 caf::to_string(down.reason));
    self->quit(down.reason == caf::exit_reason::remote_link_unreachable
                   ? caf::error{caf::exit_reason::remote_link_unreachable}
                   : caf::error{caf::exit_reason::normal});
    return;
  }
  spdlog::error("node_agent {}: an actor of this node stopped ({}); node leaves the cluster",
                st.node, caf::to_string(down.reason));
  st.healthy = false;
}

node_agent_actor::behavior_type behavior(node_agent_ptr self) {
  keep_serving_on_errors(self);
  self->set_down_handler([=](caf::down_msg& down) { on_down(self, down); });
  return {
      [=](start_atom) {
        auto& st = self->state;
        if (st.dir)
          st.conductor = st.dir->conductor;
        if (!st.conductor) {
          spdlog::error("node_agent {}: started before its cluster joined it", st.node);
          return;
        }
        if (!std::exchange(st.started, true))
          beat(self);
      },
      [=](join_atom, const typed_envelope<wire::NodeJoin>& msg, caf::actor conductor,
          caf::actor master) {
        return on_join(self, msg, std::move(conductor), std::move(master));
      },
      [=](directory_atom, const typed_envelope<wire::ClusterDirectory>& msg,
          const std::vector<caf::actor>& decode, const std::vector<caf::actor>& prefill) {
        return on_directory(self, msg, decode, prefill);
      },
      [=](tick_atom) {
        if (!refuse_unless_self_sent(self, "tick"))
          beat(self);
      },
      [=](deadline_atom) {
        if (refuse_unless_self_sent(self, "deadline") || self->state.joined)
          return;
        spdlog::warn("node_agent {}: no cluster took this node back in time; leaving",
                     self->state.node);
        self->quit(caf::exit_reason::normal);
      },
  };
}

node_agent_actor::behavior_type embedded_agent(node_agent_ptr self, uint32_t node,
                                               std::chrono::milliseconds interval,
                                               std::vector<caf::strong_actor_ptr> watched,
                                               directory_ref dir) {
  auto& st = self->state;
  st.node = node;
  st.interval = interval;
  st.dir = std::move(dir);
  for (auto& w : watched)
    self->monitor(w);
  return behavior(self);
}

node_agent_actor::behavior_type hosted_agent(node_agent_ptr self,
                                             std::chrono::milliseconds interval, hosted_node hosted,
                                             std::optional<std::chrono::milliseconds> join_within) {
  auto& st = self->state;
  st.node = hosted.node;
  st.interval = interval;
  for (auto& a : hosted.actors())
    self->monitor(a);
  st.hosted = std::move(hosted);
  if (join_within)
    self->delayed_send(self, *join_within, deadline_atom::value);
  return behavior(self);
}

} // namespace

std::vector<caf::strong_actor_ptr> hosted_node::actors() const {
  std::vector<caf::strong_actor_ptr> out;
  if (owner)
    out.push_back(caf::actor_cast<caf::strong_actor_ptr>(owner));
  for (const auto& d : decode)
    out.push_back(caf::actor_cast<caf::strong_actor_ptr>(d));
  for (const auto& p : prefill)
    out.push_back(caf::actor_cast<caf::strong_actor_ptr>(p));
  return out;
}

node_agent_actor spawn_node_agent(caf::actor_system& sys, uint32_t node,
                                  std::chrono::milliseconds interval,
                                  std::vector<caf::strong_actor_ptr> watched, directory_ref dir) {
  return sys.spawn(embedded_agent, node, interval, std::move(watched), std::move(dir));
}

node_agent_actor spawn_hosted_node_agent(caf::actor_system& sys, std::chrono::milliseconds interval,
                                         hosted_node hosted,
                                         std::optional<std::chrono::milliseconds> join_within) {
  return sys.spawn(hosted_agent, interval, std::move(hosted), join_within);
}

} // namespace crescent
