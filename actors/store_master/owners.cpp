// The store master and the block owners: liveness, eviction approval, reconciliation, frees,
// touches.
#include "actors/block_owner/block_owner.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/store_master/master_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/store.capnp.h"
#include "messages/wire_version.hpp"
#include "transport/peer_wire.hpp"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <caf/actor_cast.hpp>

#include <map>
#include <unordered_map>

namespace crescent {

void free_replicas(master_ptr self, const std::vector<storage::object_record>& records) {
  auto& st = self->state;
  std::map<uint32_t, std::vector<block_key>> by_node;
  for (const auto& r : records)
    for (const auto& x : r.replicas)
      if (live(st, x.node)) {
        by_node[x.node].push_back(r.key);
        if (x.in_dram)
          st.nodes[x.node].dram_used_bytes -=
              std::min(st.nodes[x.node].dram_used_bytes, r.size_bytes);
      }
  for (auto& [node, keys] : by_node)
    for (size_t at = 0; at < keys.size(); at += 4096) {
      const size_t n = std::min<size_t>(4096, keys.size() - at);
      auto msg = make_envelope<wire::FreeBlocks>([&](wire::FreeBlocks::Builder out) {
        auto list = out.initKeys(static_cast<unsigned>(n));
        for (unsigned i = 0; i < n; ++i)
          write_key(list[i], keys[at + i]);
      });
      self->request(st.nodes[node].owner, control_timeout, free_atom::value, msg)
          .then([] {},
                [node](caf::error& err) {
                  spdlog::warn("store_master: freeing on node {} failed: {}", node, describe(err));
                });
    }
}

void touch_replicas(master_ptr self, const std::vector<block_key>& keys) {
  auto& st = self->state;
  std::map<uint32_t, std::vector<block_key>> by_node;
  for (auto key : keys) {
    const auto* r = st.objects->find(key);
    if (r == nullptr || r->state != storage::object_state::complete)
      continue;
    for (const auto& x : r->replicas)
      if (x.in_dram && live(st, x.node))
        by_node[x.node].push_back(key);
  }
  for (auto& [node, list] : by_node)
    for (size_t at = 0; at < list.size(); at += owner_batch_max) {
      const size_t n = std::min<size_t>(owner_batch_max, list.size() - at);
      auto msg = make_envelope<wire::Touch>([&](wire::Touch::Builder out) {
        auto k = out.initKeys(static_cast<unsigned>(n));
        for (unsigned i = 0; i < n; ++i)
          write_key(k[i], list[at + i]);
      });
      self->send(st.nodes[node].owner, touch_atom::value, std::move(msg));
    }
}

void adopt_owner(master_ptr self, uint32_t node, block_owner_actor owner) {
  auto& n = self->state.nodes[node];
  if (!owner)
    return;
  if (n.owner != owner) {
    n.owner = std::move(owner);
    self->monitor(n.owner);
  }
  n.alive = true;
  n.last_seen = self->clock().now();
}

caf::result<typed_envelope<wire::PoolPeers>> on_peers(master_ptr self) {
  auto& st = self->state;
  std::vector<const transport::peer_info*> live;
  for (const auto& n : st.nodes)
    if (n.alive && n.peer)
      live.push_back(&*n.peer);
  return make_envelope<wire::PoolPeers>([&](wire::PoolPeers::Builder out) {
    auto list = out.initPeers(static_cast<unsigned>(live.size()));
    for (unsigned i = 0; i < live.size(); ++i)
      transport::to_wire(*live[i], list[i]);
  });
}

void count_lost(master_state& st, const std::vector<storage::object_record>& gone) {
  st.lost += gone.size();
  for (const auto& r : gone)
    if (r.state == storage::object_state::complete && r.acknowledged_nodes >= 2 && !r.thinned)
      ++st.lost_replicated;
}

void node_lost(master_ptr self, uint32_t node, const char* why) {
  auto& st = self->state;
  if (!live(st, node))
    return;
  const bool keep_ssd = st.options.ssd_grace.count() > 0;
  st.nodes[node].alive = false;
  st.nodes[node].lost_at = self->clock().now();
  st.nodes[node].ssd_waiting = keep_ssd;
  abandon_allocations(self, node);
  auto lost = st.objects->drop_node(node, keep_ssd);
  if (!lost) {
    spdlog::error("store_master: dropping node {}: {}", node, describe(lost.error()));
    return;
  }
  if (st.ever_lost.size() < st.nodes.size())
    st.ever_lost.resize(st.nodes.size(), false);
  st.ever_lost[node] = true;
  count_lost(st, *lost);
  spdlog::warn("store_master: node {} left the pool ({}); {} blocks lost their last replica", node,
               why, lost->size());
  free_replicas(self, *lost); // other replicas of pending blocks
}

void sweep(master_ptr self) {
  auto& st = self->state;
  auto done = st.objects->collect(now_ns(self));
  for (const auto& r : done)
    if (r.state == storage::object_state::pending)
      ++st.reclaimed;
  free_replicas(self, done);
  reclaim_replica_puts(self);
  forget_writers(self);
  const auto now = self->clock().now();
  for (uint32_t n = 0; n < st.nodes.size(); ++n) {
    auto& v = st.nodes[n];
    if (v.alive && !conductor_decides_membership(st) && now - v.last_seen > st.options.node_timeout)
      node_lost(self, n, "no heartbeat");
    if (!v.alive && v.ssd_waiting && now - v.lost_at > st.options.ssd_grace) {
      v.ssd_waiting = false; // [rare] the node did not come back: its SSD copies are gone too
      if (auto lost = st.objects->drop_node(n)) {
        count_lost(st, *lost);
        spdlog::warn("store_master: node {} did not come back; {} blocks only on its SSD are lost",
                     n, lost->size());
      }
    }
  }
}

bool conductor_decides_membership(const master_state& st) {
  return st.dir && st.dir->conductor;
}

void on_node_status(master_ptr self, const typed_envelope<wire::NodeStatus>& msg) {
  auto& st = self->state;
  // Only the conductor's view counts: anyone else could take a node out of the pool.
  if (refuse_unless_sent_by(
          self, conductor_decides_membership(st) ? st.dir->conductor.address() : caf::actor_addr{},
          "a node's status", "the conductor"))
    return;
  struct status {
    uint32_t node;
    bool live;
    std::string reason;
  };
  auto s = read_as<wire::NodeStatus>(msg, [](wire::NodeStatus::Reader in) -> caf::expected<status> {
    if (in.getReason().size() > node_status_reason_max)
      return make_error(errc::limit_exceeded, "a node status's reason over 512 bytes");
    return status{in.getNode(), in.getLive(), in.getReason().cStr()};
  });
  if (s && s->node >= st.nodes.size())
    s = make_error(errc::invalid_argument, "status of unknown node " + std::to_string(s->node));
  if (!s) {
    st.bad.refuse(st.name, std::move(s.error()));
    return;
  }
  st.nodes[s->node].member = s->live;
  // Back: its owner rejoins by reporting, which its next heartbeat is refused for.
  if (!s->live)
    node_lost(self, s->node, s->reason.c_str());
}

caf::result<void> on_owner_heartbeat(master_ptr self,
                                     const typed_envelope<wire::OwnerHeartbeat>& msg) {
  auto& st = self->state;
  struct beat {
    uint32_t node;
    uint64_t capacity, used, write_errors, read_errors;
  };
  auto b = read_as<wire::OwnerHeartbeat>(msg, [](wire::OwnerHeartbeat::Reader in) {
    return beat{in.getNode(), in.getDramCapacityBytes(), in.getDramUsedBytes(),
                in.getSsdWriteErrors(), in.getSsdReadErrors()};
  });
  if (!b)
    return st.bad.refuse(st.name, std::move(b.error()));
  if (b->node >= st.nodes.size())
    return st.bad.refuse(st.name, make_error(errc::invalid_argument, "heartbeat from an unknown "
                                                                     "node"));
  auto& n = st.nodes[b->node];
  if (!n.alive)
    return make_error(errc::unavailable, "node " + std::to_string(b->node) +
                                             " left the pool; it must report before rejoining");
  // Only the node's owner keeps the node alive and says what it holds.
  if (auto err = refuse_unless_sent_by(self, n.owner.address(),
                                       "a heartbeat of node " + std::to_string(b->node),
                                       "its block owner"))
    return err;
  n.last_seen = self->clock().now();
  n.dram_capacity_bytes = b->capacity;
  n.dram_used_bytes = b->used;
  n.ssd_write_errors = b->write_errors;
  n.ssd_read_errors = b->read_errors;
  return caf::unit;
}

namespace {

// The conductor's prefix index follows what is in DRAM where, and what went to the SSD tier
// (fire and forget: a lost notice costs a placement that expects a block it then does not find,
// or misses one it could have read back).
void tell_conductor_gone(master_ptr self, uint32_t node, const std::vector<block_key>& keys,
                         const std::vector<bool>& offloaded) {
  const auto& conductor = self->state.dir ? self->state.dir->conductor : conductor_actor{};
  if (!conductor || keys.empty())
    return;
  auto msg = make_envelope<wire::BlocksGone>([&](wire::BlocksGone::Builder out) {
    out.setNode(node);
    write_keys(out.initKeys(static_cast<unsigned>(keys.size())), keys);
    if (std::find(offloaded.begin(), offloaded.end(), true) == offloaded.end())
      return; // none: the list stays empty
    auto list = out.initOffloaded(static_cast<unsigned>(offloaded.size()));
    for (unsigned i = 0; i < offloaded.size(); ++i)
      list.set(i, offloaded[i]);
  });
  self->send(conductor, evicted_atom::value, std::move(msg));
}

} // namespace

caf::result<typed_envelope<wire::EvictReply>>
on_evict(master_ptr self, const typed_envelope<wire::EvictRequest>& msg) {
  auto& st = self->state;
  struct request {
    uint32_t node;
    std::vector<block_key> keys;
    std::vector<bool> offloaded;
  };
  auto r = read_as<wire::EvictRequest>(msg, [](wire::EvictRequest::Reader in) {
    request out{in.getNode(), to_keys(in.getKeys()), {}};
    for (auto o : in.getOffloaded())
      out.offloaded.push_back(o);
    return out;
  });
  if (!r)
    return st.bad.refuse(st.name, std::move(r.error()));
  if (r->node >= st.nodes.size() || r->keys.size() != r->offloaded.size() ||
      r->keys.size() > storage::object_store::batch_max)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument, "malformed evict request"));
  // Only the node's owner evicts its replicas: anyone else could drop blocks from the pool.
  if (auto err = refuse_unless_sent_by(self, st.nodes[r->node].owner.address(),
                                       "an eviction on node " + std::to_string(r->node),
                                       "its block owner"))
    return err;
  const int64_t now = now_ns(self);
  std::vector<bool> approved;
  std::vector<block_key> gone; // left the node's DRAM
  std::vector<bool> gone_to_ssd;
  for (size_t i = 0; i < r->keys.size(); ++i) {
    const auto* rec = st.objects->find(r->keys[i]);
    if (rec == nullptr) {
      approved.push_back(true); // unknown here: the owner should not keep it
      continue;
    }
    // The node's replica is SSD-only here while the owner has it in DRAM: a promotion whose
    // answer is still on its way. Its DRAM copy is about to be served: not now.
    const auto mine = std::find_if(rec->replicas.begin(), rec->replicas.end(),
                                   [&](const storage::replica& x) { return x.node == r->node; });
    if (!st.objects->evictable(*rec, now) || (mine != rec->replicas.end() && !mine->in_dram)) {
      approved.push_back(false);
      ++st.refused;
      continue;
    }
    std::vector<storage::replica> next;
    for (auto x : rec->replicas) {
      if (x.node == r->node) {
        if (!r->offloaded[i])
          continue;
        x.in_dram = false;
        x.dram = {};
        x.on_ssd = true;
      }
      next.push_back(x);
    }
    const bool thins = next.size() < rec->replicas.size();
    if (auto done = st.objects->set_replicas(r->keys[i], std::move(next)); !done) {
      approved.push_back(false);
      continue;
    }
    if (thins)
      st.objects->note_thinned(r->keys[i]); // on purpose: fewer nodes hold it from now on
    approved.push_back(true);
    ++st.approved;
    gone.push_back(r->keys[i]);
    gone_to_ssd.push_back(r->offloaded[i]);
  }
  tell_conductor_gone(self, r->node, gone, gone_to_ssd);
  return make_envelope<wire::EvictReply>([&](wire::EvictReply::Builder out) {
    auto list = out.initApproved(static_cast<unsigned>(approved.size()));
    for (unsigned i = 0; i < approved.size(); ++i)
      list.set(i, approved[i]);
  });
}

caf::result<typed_envelope<wire::OwnerReportReply>>
on_owner_report(master_ptr self, const typed_envelope<wire::OwnerReport>& msg) {
  auto& st = self->state;
  struct held {
    bool in_dram;
    transport::region_handle dram;
    bool on_ssd;
  };
  struct report {
    uint32_t node;
    std::unordered_map<block_key, held> blocks;
    std::optional<transport::peer_info> peer;
    uint64_t capacity, used;
  };
  auto r = read_as<wire::OwnerReport>(msg, [](wire::OwnerReport::Reader in) {
    // An owner of another build would name blocks by keys this master reads differently.
    if (auto err = check_wire_version(in.getWireVersion(), "an owner", "this master"))
      return caf::expected<report>{std::move(err)};
    report out{in.getNode(), {}, {}, in.getDramCapacityBytes(), in.getDramUsedBytes()};
    for (auto b : in.getBlocks())
      out.blocks[read_key(b.getKey())] = {b.getInDram(), transport::from_wire(b.getDram()),
                                          b.getOnSsd()};
    if (in.getHasPeer()) {
      auto peer = transport::from_wire(in.getPeer());
      if (!peer)
        return caf::expected<report>{std::move(peer.error())};
      out.peer = std::move(*peer);
    }
    return caf::expected<report>{std::move(out)};
  });
  if (!r)
    return st.bad.refuse(st.name, std::move(r.error()));
  auto owner = caf::actor_cast<block_owner_actor>(self->current_sender());
  if (!owner)
    return st.bad.refuse(
        st.name, make_error(errc::invalid_argument, "an owner report must come from the owner"));
  if (live(st, r->node) && st.nodes[r->node].owner && st.nodes[r->node].owner != owner)
    return st.bad.refuse(st.name, make_error(errc::access_denied,
                                             "node " + std::to_string(r->node) +
                                                 " has a live owner; another cannot take it over"));
  if (r->node >= st.nodes.size())
    return st.bad.refuse(st.name, make_error(errc::invalid_argument, "report from unknown node"));
  if (!st.nodes[r->node].member)
    return make_error(errc::unavailable, "node " + std::to_string(r->node) +
                                             " is not live in the conductor's view; it rejoins "
                                             "once it is");
  // Replicas the owner no longer has are dropped; what it has but the master does not know
  // (or no longer wants) is freed.
  std::vector<block_key> keys;
  st.objects->for_each([&](const storage::object_record& rec) {
    for (const auto& x : rec.replicas)
      if (x.node == r->node)
        keys.push_back(rec.key);
  });
  for (auto key : keys) {
    const auto* rec = st.objects->find(key);
    if (rec == nullptr || rec->state != storage::object_state::complete)
      continue;
    std::vector<storage::replica> next;
    for (auto x : rec->replicas) {
      if (x.node == r->node) {
        auto h = r->blocks.find(key);
        if (h == r->blocks.end() || (!h->second.in_dram && !h->second.on_ssd))
          continue;
        x.in_dram = h->second.in_dram;
        x.dram = h->second.dram;
        x.on_ssd = h->second.on_ssd;
      }
      next.push_back(x);
    }
    if (auto gone = st.objects->set_replicas(key, std::move(next)); gone)
      count_lost(st, *gone);
  }
  std::vector<block_key> drop;
  for (const auto& [key, h] : r->blocks) {
    const auto* rec = st.objects->find(key);
    bool known = false;
    if (rec != nullptr)
      for (const auto& x : rec->replicas)
        known = known || x.node == r->node;
    if (!known)
      drop.push_back(key);
  }
  // The reporting owner (re)joins the pool as this node's owner.
  adopt_owner(self, r->node, std::move(owner));
  st.nodes[r->node].ssd_waiting = false;
  if (r->peer)
    st.nodes[r->node].peer = std::move(r->peer);
  st.nodes[r->node].dram_capacity_bytes = r->capacity;
  st.nodes[r->node].dram_used_bytes = r->used;
  return make_envelope<wire::OwnerReportReply>([&](wire::OwnerReportReply::Builder out) {
    write_keys(out.initDrop(static_cast<unsigned>(drop.size())), drop);
  });
}

} // namespace crescent
