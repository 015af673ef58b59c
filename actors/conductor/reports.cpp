// What the conductor learns from: prefill reports (queue length, new blocks in the index),
// request reports (decode load) and heartbeats (liveness).
#include "actors/conductor/conductor_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"

#include <caf/stateful_actor.hpp>

#include <algorithm>
#include <bit>

namespace crescent {

namespace {

constexpr size_t report_keys_max = 1u << 16;

// Whose reports for prefill `instance` count (none without a directory).
caf::actor_addr reporter(conductor_ptr self, uint32_t instance) {
  const auto& dir = self->state.options.dir;
  if (!dir)
    return {};
  if (self->state.options.coupled)
    return instance < dir->coupled.size() ? dir->coupled[instance].address() : caf::actor_addr{};
  return instance < dir->prefill.size() ? dir->prefill[instance].address() : caf::actor_addr{};
}

void close_prefill(conductor_ptr self, placed_request& r, uint64_t request_id,
                   uint64_t store_ns = 0) {
  if (r.prefill_open)
    end_prefill_job(self, r.prefill, request_id, store_ns);
  r.prefill_open = false;
}

// The job's actual compute against the model's prediction for what it actually computed: the
// time model learns the machine. Not against the prediction made at placement: a job often
// reuses more than was cached then (a job queued before it stored the prefix), and that is no
// sign of a faster machine.
void learn(conductor_ptr self, uint32_t reused_tokens, uint32_t computed_tokens,
           uint64_t compute_ns) {
  auto& st = self->state;
  if (computed_tokens == 0)
    return;
  st.model->correct(st.model->prefill_ns(reused_tokens + computed_tokens, reused_tokens),
                    compute_ns);
}

} // namespace

void end_prefill_job(conductor_ptr self, uint32_t instance, uint64_t request_id,
                     uint64_t store_ns) {
  auto& t = self->state.prefill[instance];
  auto i = std::find_if(t.jobs.begin(), t.jobs.end(),
                        [&](const queued_job& j) { return j.request_id == request_id; });
  if (i == t.jobs.end())
    return;
  t.queued_tokens -= std::min(t.queued_tokens, i->compute_tokens);
  t.jobs.erase(i);
  // The jobs left run one after another from when this one left the compute slot: now, less the
  // time it stored its blocks beside the next one (never before the job it ends started).
  const int64_t now = now_ns(self);
  t.free_at_ns =
      std::max(t.running_since_ns, now - static_cast<int64_t>(std::min<uint64_t>(store_ns, now)));
  t.running_since_ns = t.free_at_ns;
  for (const auto& j : t.jobs)
    t.free_at_ns += static_cast<int64_t>(j.occupancy_ns);
}

caf::result<void> on_prefill_report(conductor_ptr self,
                                    const typed_envelope<wire::PrefillReport>& msg) {
  auto& st = self->state;
  struct report {
    uint64_t request_id;
    uint32_t instance;
    uint32_t node;
    bool ok;
    uint32_t computed_tokens, reused_tokens;
    uint64_t compute_ns;
    std::vector<block_key> stored;
    std::vector<uint64_t> stored_on; // per stored key, node_set::words: the nodes holding it
    uint32_t pulled_blocks;
    uint64_t pull_ns;
    uint32_t pulled_from;
    uint64_t store_ns;
    std::vector<block_key> dropped; // a coupled instance's evictions from its own cache
  };
  auto r = read_as<wire::PrefillReport>(msg, [](wire::PrefillReport::Reader in) {
    auto keys = in.getStoredKeys();
    if (keys.size() > report_keys_max)
      return caf::expected<report>{make_error(errc::limit_exceeded, "report of too many keys")};
    if (in.getDroppedKeys().size() > report_keys_max)
      return caf::expected<report>{make_error(errc::limit_exceeded, "report of too many keys")};
    auto on = in.getStoredOn();
    if (on.size() != 0 && on.size() != keys.size() * node_set::words)
      return caf::expected<report>{make_error(
          errc::invalid_argument, "a report needs the holding nodes of every stored key")};
    return caf::expected<report>{report{
        in.getRequestId(), in.getInstance(), in.getNode(), in.getOk(), in.getComputedTokens(),
        in.getReusedTokens(), in.getComputeNs(), to_keys(keys), to_vector(on), in.getPulledBlocks(),
        in.getPullNs(), in.getPulledFrom(), in.getStoreNs(), to_keys(in.getDroppedKeys())}};
  });
  if (!r)
    return st.bad.refuse(st.name, std::move(r.error()));
  if (r->node >= st.node_last_seen.size() || r->instance >= st.prefill.size() ||
      st.options.prefill_node[r->instance] != r->node)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "a report for prefill instance " +
                                                 std::to_string(r->instance) + " on node " +
                                                 std::to_string(r->node) + ", which there is not"));
  if (auto err = refuse_unless_sent_by(
          self, reporter(self, r->instance),
          "a report for prefill instance " + std::to_string(r->instance), "that instance's worker"))
    return err;
  // A coupled instance's evictions came before what it stored now (a block may be both).
  for (auto key : r->dropped)
    st.index.remove(key, r->node);
  // Where the replicas went (the store master placed them), else the reporting node.
  for (size_t k = 0; k < r->stored.size(); ++k) {
    node_set holders;
    if (r->stored_on.empty())
      holders.insert(r->node);
    else
      holders = node_set::from_words(std::span<const uint64_t, node_set::words>{
          &r->stored_on[k * node_set::words], node_set::words});
    holders.for_each([&](uint32_t n) {
      if (n < st.node_last_seen.size())
        st.index.add(r->stored[k], n);
    });
  }
  // What a pull took teaches the bandwidth between the two nodes (in the model's bytes of pool
  // blocks: the worker's pages may be stand-ins, the blocks compressed).
  if (r->pulled_blocks > 0 && r->pulled_from < st.node_last_seen.size() &&
      r->pulled_from != r->node)
    st.model->learn_transfer(r->pulled_from, r->node,
                             uint64_t{r->pulled_blocks} * st.model->pool_block_bytes(), r->pull_ns);
  // A report for a request that already ended (it timed out, say) still teaches the index.
  if (auto i = st.in_flight.find(r->request_id); i != st.in_flight.end()) {
    if (r->ok && i->second.prefill_open && i->second.prefill == r->instance)
      learn(self, r->reused_tokens, r->computed_tokens, r->compute_ns);
    close_prefill(self, i->second, r->request_id, r->store_ns);
    st.inbound[i->second.decode].remove(r->request_id); // its KV has landed
  }
  return caf::unit;
}

caf::result<void> on_request_report(conductor_ptr self,
                                    const typed_envelope<wire::RequestReport>& msg) {
  auto& st = self->state;
  auto id = read_as<wire::RequestReport>(
      msg, [](wire::RequestReport::Reader in) { return in.getRequestId(); });
  if (!id)
    return st.bad.refuse(st.name, std::move(id.error()));
  auto i = st.in_flight.find(*id);
  if (i == st.in_flight.end())
    return caf::unit; // rejected at placement, or reported twice
  if (auto err = refuse_unless_sent_by(self, i->second.requester.address(),
                                       "the end of request " + std::to_string(*id),
                                       "the request actor it was placed for"))
    return err;
  close_prefill(self, i->second, *id);
  st.decode[i->second.decode].remove(*id);
  st.inbound[i->second.decode].remove(*id);
  st.in_flight.erase(i);
  return caf::unit;
}

caf::result<void> on_heartbeat(conductor_ptr self, const typed_envelope<wire::Heartbeat>& msg) {
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
  if (auto err =
          refuse_unless_sent_by(self, st.watching ? st.node_agent[*node] : caf::actor_addr{},
                                "a heartbeat for node " + std::to_string(*node), "its node agent"))
    return err;
  st.node_last_seen[*node] = self->clock().now();
  return caf::unit;
}

void on_blocks_gone(conductor_ptr self, const typed_envelope<wire::BlocksGone>& msg) {
  auto& st = self->state;
  // Only the store master knows what left a node; anyone else could make blocks look absent.
  if (refuse_unless_sent_by(self, st.options.store_master, "BlocksGone", "the store master"))
    return;
  struct gone {
    uint32_t node;
    std::vector<block_key> keys;
    std::vector<bool> offloaded;
  };
  auto g = read_as<wire::BlocksGone>(msg, [](wire::BlocksGone::Reader in) {
    gone out{in.getNode(), to_keys(in.getKeys()), {}};
    for (auto o : in.getOffloaded())
      out.offloaded.push_back(o);
    return out;
  });
  if (!g) {
    st.bad.refuse(st.name, std::move(g.error()));
    return;
  }
  if (g->node >= st.node_last_seen.size() || g->keys.size() > report_keys_max ||
      (!g->offloaded.empty() && g->offloaded.size() != g->keys.size())) {
    st.bad.refuse(st.name, make_error(errc::invalid_argument, "malformed blocks gone"));
    return;
  }
  for (size_t i = 0; i < g->keys.size(); ++i) {
    st.index.remove(g->keys[i], g->node);
    if (st.options.ssd_index && !g->offloaded.empty() && g->offloaded[i])
      st.ssd_index.add(g->keys[i], g->node);
  }
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
  st.node_was_live.assign(agents.size(), true);
  self->delayed_send(self, st.options.liveness_check, tick_atom::value);
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

caf::result<void> on_rejoin(conductor_ptr self, uint32_t node, const caf::actor& agent) {
  auto& st = self->state;
  // Only bring-up's process knows that a node's new process passed the join's checks.
  const bool local = self->current_sender() && self->current_sender()->node() == self->node();
  if (!local || !st.watching || node >= st.node_agent.size() || !agent)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "a rejoin names a node and its new agent, and comes "
                                             "from the cluster's process after bring-up"));
  if (!st.node_gone[node])
    return st.bad.refuse(
        st.name, make_error(errc::already_exists, "node " + std::to_string(node) +
                                                      " has its agent still: it is not gone"));
  st.node_gone[node] = false;
  st.node_agent[node] = agent.address();
  st.node_last_seen[node] = self->clock().now(); // its first heartbeat is due an interval on
  self->monitor(agent);
  return caf::unit;
}

namespace {

std::string why_not_live(const conductor_state& st, uint32_t n) {
  return st.node_gone[n] ? "node " + std::to_string(n) + " is gone (its agent stopped)"
                         : "node " + std::to_string(n) + " went silent: no heartbeat for " +
                               std::to_string(st.options.heartbeat_timeout.count()) + " ms";
}

// The store master follows this view: a node out of it leaves the pool, and rejoins it (its
// owner reports) once it is back.
void tell_store_master(conductor_ptr self, uint32_t n, bool live) {
  auto& st = self->state;
  if (!st.options.dir || !st.options.dir->store_master)
    return;
  auto reason = live ? std::string{} : why_not_live(st, n);
  reason.resize(std::min(reason.size(), node_status_reason_max));
  self->send(st.options.dir->store_master, membership_atom::value,
             make_envelope<wire::NodeStatus>([&](wire::NodeStatus::Builder out) {
               out.setNode(n);
               out.setLive(live);
               out.setReason(reason);
             }));
}

} // namespace

void check_liveness(conductor_ptr self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  std::vector<uint32_t> lost;
  for (uint32_t n = 0; n < st.node_was_live.size(); ++n) {
    const bool live = node_alive(self, n, now);
    if (st.node_was_live[n] != live)
      tell_store_master(self, n, live);
    if (st.node_was_live[n] && !live)
      lost.push_back(n);
    st.node_was_live[n] = live; // a silent node that heartbeats again is placed on again
  }
  if (lost.empty())
    return;
  // The store master drops a node out of the view from the pool, and what it held is freed when
  // it rejoins: the index forgets it too, so no placement counts on it or pulls from it.
  for (const uint32_t n : lost) {
    st.index.remove_node(n);
    st.ssd_index.remove_node(n);
  }
  // A request waits for its prefill node until its first token, and for its decode node to
  // the end: on a silent node it would wait for its deadline. It fails now, with the reason.
  for (const auto& [id, r] : st.in_flight) {
    const uint32_t prefill_node = st.options.prefill_node[r.prefill];
    const uint32_t decode_node = st.options.decode_node[r.decode];
    for (const uint32_t n : lost) {
      if (!(r.prefill_open && prefill_node == n) && decode_node != n)
        continue;
      const std::string reason = why_not_live(st, n);
      auto msg = make_envelope<wire::RequestFailed>([&](wire::RequestFailed::Builder out) {
        out.setRequestId(id);
        out.setReason(reason);
      });
      self->send(r.requester, failed_atom::value, msg);
      break;
    }
  }
}

} // namespace crescent
