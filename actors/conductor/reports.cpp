// What the conductor learns from: prefill reports (queue length, new blocks in the index),
// request reports (decode load) and heartbeats (liveness).
#include "actors/conductor/conductor_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"

#include <caf/stateful_actor.hpp>

namespace crescent {

namespace {

constexpr size_t report_keys_max = 1u << 16;

void close_prefill(conductor_state& st, placed_request& r) {
  if (r.prefill_open && st.prefill_queued[r.prefill] > 0)
    --st.prefill_queued[r.prefill];
  r.prefill_open = false;
}

} // namespace

caf::result<void> on_prefill_report(conductor_ptr self, const envelope& msg) {
  auto& st = self->state;
  struct report {
    uint64_t request_id;
    uint32_t node;
    std::vector<uint64_t> stored;
  };
  auto r = read_as<wire::PrefillReport>(msg, [](wire::PrefillReport::Reader in) {
    auto keys = in.getStoredKeys();
    if (keys.size() > report_keys_max)
      return caf::expected<report>{make_error(errc::limit_exceeded, "report of too many keys")};
    return caf::expected<report>{report{in.getRequestId(), in.getNode(), to_vector(keys)}};
  });
  if (!r)
    return st.bad.refuse(st.name, std::move(r.error()));
  if (r->node >= st.node_last_seen.size())
    return st.bad.refuse(st.name, make_error(errc::invalid_argument, "report from unknown node " +
                                                                         std::to_string(r->node)));
  for (auto key : r->stored)
    st.index.add(key, r->node);
  // A report for a request that already ended (it timed out, say) still teaches the index.
  if (auto i = st.in_flight.find(r->request_id); i != st.in_flight.end())
    close_prefill(st, i->second);
  return caf::unit;
}

caf::result<void> on_request_report(conductor_ptr self, const envelope& msg) {
  auto& st = self->state;
  auto id = read_as<wire::RequestReport>(
      msg, [](wire::RequestReport::Reader in) { return in.getRequestId(); });
  if (!id)
    return st.bad.refuse(st.name, std::move(id.error()));
  auto i = st.in_flight.find(*id);
  if (i == st.in_flight.end())
    return caf::unit; // rejected at placement, or reported twice
  close_prefill(st, i->second);
  if (st.decode_active[i->second.decode] > 0)
    --st.decode_active[i->second.decode];
  st.in_flight.erase(i);
  return caf::unit;
}

caf::result<void> on_heartbeat(conductor_ptr self, const envelope& msg) {
  auto& st = self->state;
  auto node =
      read_as<wire::Heartbeat>(msg, [](wire::Heartbeat::Reader in) { return in.getNode(); });
  if (!node)
    return st.bad.refuse(st.name, std::move(node.error()));
  if (*node >= st.node_last_seen.size())
    return st.bad.refuse(
        st.name,
        make_error(errc::invalid_argument, "heartbeat from unknown node " + std::to_string(*node)));
  // Only the node's own agent speaks for it: another actor's heartbeat must neither keep a node
  // alive nor bind it to an actor whose end would take the node out.
  if (!st.watching || !self->current_sender() ||
      self->current_sender()->address() != st.node_agent[*node])
    return st.bad.refuse(
        st.name, make_error(errc::access_denied, "heartbeat for node " + std::to_string(*node) +
                                                     " from an actor that is not its agent"));
  st.node_last_seen[*node] = self->clock().now();
  return caf::unit;
}

void on_watch(conductor_ptr self, const std::vector<caf::actor>& agents) {
  auto& st = self->state;
  // Bring-up sends it from this process; a node process holding the conductor may not.
  const bool local = self->current_sender() && self->current_sender()->node() == self->node();
  if (st.watching || !local || agents.size() != st.node_agent.size()) {
    st.bad.refuse(st.name,
                  make_error(errc::invalid_argument, "the node agents are told once, one per node, "
                                                     "by bring-up"));
    return;
  }
  st.watching = true;
  // Bring-up may have waited long for node processes: every node's time starts now.
  const auto now = self->clock().now();
  for (uint32_t n = 0; n < agents.size(); ++n) {
    st.node_last_seen[n] = now;
    st.node_agent[n] = agents[n].address();
    if (agents[n])
      self->monitor(agents[n]);
    else
      st.node_gone[n] = true;
  }
}

} // namespace crescent
