// Puts: put_start picks `replica_count` distinct live nodes per new block, has their owners
// allocate space and records the blocks pending; the writer writes every replica through the
// transfer engine; put_commit makes them readable, acknowledged once synced.
#include "actors/common/code_probe.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/store_master/master_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/stateful_actor.hpp>

#include <algorithm>
#include <map>
#include <unordered_set>

namespace crescent {

namespace {

struct put_args {
  uint32_t node = 0; // the writer's; may have no owner (a client outside the pool's nodes)
  uint32_t replicas = 1;
  wire::ReplicaPlacement placement = wire::ReplicaPlacement::LOCAL_FIRST;
  std::vector<block_key> keys;
  std::vector<uint64_t> sizes;
  std::vector<uint32_t> positions;
  bool replicate = false; // one more replica of existing blocks on `node`
};

constexpr uint64_t block_bytes_max = 64ull << 20;

caf::error check(const put_args& a) {
  const size_t n = a.keys.size();
  if (n == 0 || n > storage::object_store::batch_max)
    return make_error(errc::limit_exceeded, "a put names 1 to 4096 blocks");
  if (a.sizes.size() != n || a.positions.size() != n)
    return make_error(errc::invalid_argument, "a put needs a size and a position per key");
  if (a.replicas == 0 || a.replicas > storage::object_store::replicas_max)
    return make_error(errc::invalid_argument, "replica count must be in [1, 8]");
  for (auto s : a.sizes)
    if (s == 0 || s > block_bytes_max)
      return make_error(errc::invalid_argument, "block sizes must be in [1, 64 MiB]");
  return caf::none;
}

uint64_t free_bytes(const node_view& n) {
  return n.dram_capacity_bytes == 0
             ? UINT64_MAX / 2 - n.dram_used_bytes // not heard of yet: assume room
             : n.dram_capacity_bytes - std::min(n.dram_used_bytes, n.dram_capacity_bytes);
}

// A complete block with none on `node`, and a DRAM replica on another live node (a copy read
// from elsewhere) or none in any live node's DRAM (a copy computed again, of a block only on
// SSD): it may have one more replica there. The replica's commit checks its bytes' checksum.
bool replica_wanted(const master_state& st, const storage::object_record* r, uint32_t node) {
  if (r == nullptr || r->state != storage::object_state::complete ||
      r->replicas.size() >= storage::object_store::replicas_max)
    return false;
  bool elsewhere = false;
  for (const auto& x : r->replicas) {
    if (x.node == node)
      return false;
    elsewhere = elsewhere || (x.in_dram && live(st, x.node));
  }
  return elsewhere || available(st, r) == availability::ssd;
}

// Live nodes in the order this placement prefers them.
std::vector<uint32_t> candidates(master_ptr self, const put_args& a) {
  auto& st = self->state;
  std::vector<uint32_t> live;
  for (uint32_t n = 0; n < st.nodes.size(); ++n)
    if (st.nodes[n].alive)
      live.push_back(n);
  if (a.placement == wire::ReplicaPlacement::RANDOM) {
    std::shuffle(live.begin(), live.end(), st.rng);
    return live;
  }
  std::stable_sort(live.begin(), live.end(), [&](uint32_t x, uint32_t y) {
    return free_bytes(st.nodes[x]) > free_bytes(st.nodes[y]);
  });
  if (a.placement == wire::ReplicaPlacement::LOCAL_FIRST) {
    auto i = std::find(live.begin(), live.end(), a.node);
    if (i != live.end())
      std::rotate(live.begin(), i, i + 1);
  }
  return live;
}

// The allocation of one put in flight: which node holds which replica of which key.
struct put_round {
  put_args args;
  std::vector<block_key> fresh;                           // keys being allocated
  std::vector<size_t> fresh_at;                           // per fresh key: its index in args.keys
  std::vector<std::vector<uint32_t>> nodes;               // per fresh key
  std::vector<std::vector<transport::region_handle>> got; // per fresh key, per replica
  size_t outstanding = 0;
  caf::typed_response_promise<typed_envelope<wire::PutStartReply>> promise;
  caf::actor_addr writer; // who asked: only it commits or revokes what is granted
};

typed_envelope<wire::PutStartReply>
make_reply(master_ptr self, const put_round& round,
           const std::unordered_map<block_key, size_t>& granted) {
  auto& st = self->state;
  return make_envelope<wire::PutStartReply>([&](wire::PutStartReply::Builder out) {
    auto slots = out.initSlots(static_cast<unsigned>(round.args.keys.size()));
    for (unsigned i = 0; i < round.args.keys.size(); ++i) {
      const block_key key = round.args.keys[i];
      write_key(slots[i].initKey(), key);
      if (auto g = granted.find(key); g != granted.end()) {
        const auto& handles = round.got[g->second];
        auto list = slots[i].initReplicas(static_cast<unsigned>(handles.size()));
        for (unsigned r = 0; r < handles.size(); ++r)
          transport::to_wire(handles[r], list[r]);
      } else if (const auto* r = st.objects->find(key); r != nullptr) {
        if (available(st, r) == availability::ssd)
          slots[i].setOnlyOnSsd();
        else
          slots[i].setExists();
      } else {
        slots[i].setNoSpace();
      }
    }
  });
}

// A replicate round: each granted replica waits for its commit; what cannot be one goes back.
void finish_replicas(master_ptr self, std::shared_ptr<put_round> round) {
  auto& st = self->state;
  std::unordered_map<block_key, size_t> granted;
  std::vector<storage::object_record> give_back;
  const int64_t deadline =
      now_ns(self) +
      std::chrono::duration_cast<std::chrono::nanoseconds>(st.options.put_timeout).count();
  for (size_t k = 0; k < round->fresh.size(); ++k) {
    const block_key key = round->fresh[k];
    const auto& h = round->got[k][0];
    if (!h.valid())
      continue;
    const auto* r = st.objects->find(key);
    if (replica_wanted(st, r, round->args.node) && st.replica_puts.count(key) == 0) {
      st.replica_puts.emplace(key, pending_replica{round->args.node, h, deadline, round->writer});
      granted.emplace(key, k);
      continue;
    }
    storage::object_record back;
    back.key = key;
    back.replicas.push_back({round->args.node, true, h, false});
    give_back.push_back(std::move(back));
  }
  free_replicas(self, give_back);
  round->promise.deliver(make_reply(self, *round, granted));
}

// Every owner answered: record complete allocations pending, give back partial ones.
void finish(master_ptr self, std::shared_ptr<put_round> round) {
  if (round->args.replicate) {
    finish_replicas(self, std::move(round));
    return;
  }
  auto& st = self->state;
  std::vector<storage::object_record> records;
  std::vector<storage::object_record> give_back;
  std::unordered_map<block_key, size_t> granted;
  const int64_t deadline =
      now_ns(self) +
      std::chrono::duration_cast<std::chrono::nanoseconds>(st.options.put_timeout).count();
  for (size_t k = 0; k < round->fresh.size(); ++k) {
    storage::object_record r;
    r.key = round->fresh[k];
    r.size_bytes = round->args.sizes[round->fresh_at[k]];
    r.put_deadline_ns = deadline;
    bool complete = true;
    for (size_t x = 0; x < round->nodes[k].size(); ++x) {
      const auto& h = round->got[k][x];
      if (!h.valid()) {
        complete = false;
        continue;
      }
      r.replicas.push_back({round->nodes[k][x], true, h, false});
    }
    if (complete && st.objects->find(r.key) == nullptr) {
      granted.emplace(r.key, k);
      records.push_back(std::move(r));
    } else if (!r.replicas.empty()) {
      give_back.push_back(std::move(r));
    }
  }
  if (auto err = st.objects->start(records)) {
    give_back.insert(give_back.end(), records.begin(), records.end());
    free_replicas(self, give_back);
    round->promise.deliver(std::move(err));
    return;
  }
  for (const auto& r : records)
    st.writers[r.key] = round->writer;
  free_replicas(self, give_back);
  round->promise.deliver(make_reply(self, *round, granted));
}

void ask_owner(master_ptr self, std::shared_ptr<put_round> round, uint32_t node,
               std::vector<std::pair<size_t, size_t>> slots) {
  auto& st = self->state;
  auto msg = make_envelope<wire::Allocate>([&](wire::Allocate::Builder out) {
    auto keys = out.initKeys(static_cast<unsigned>(slots.size()));
    auto sizes = out.initSizes(static_cast<unsigned>(slots.size()));
    auto positions = out.initChainPositions(static_cast<unsigned>(slots.size()));
    for (unsigned i = 0; i < slots.size(); ++i) {
      const block_key key = round->fresh[slots[i].first];
      const size_t at = round->fresh_at[slots[i].first];
      write_key(keys[i], key);
      sizes.set(i, round->args.sizes[at]);
      positions.set(i, round->args.positions[at]);
    }
  });
  auto done = [=](std::vector<transport::region_handle> handles) {
    for (size_t i = 0; i < slots.size() && i < handles.size(); ++i)
      round->got[slots[i].first][slots[i].second] = handles[i];
    if (--round->outstanding == 0)
      finish(self, round);
  };
  const uint64_t id = ++st.next_allocation;
  st.allocations.emplace(id, pending_allocation{node, done});
  // Whichever comes first, the owner's answer or its loss, answers the allocation once.
  auto answer = [=](std::vector<transport::region_handle> handles) {
    auto& pending = self->state.allocations;
    auto i = pending.find(id);
    if (i == pending.end())
      return;
    auto finish_slots = std::move(i->second.done);
    pending.erase(i);
    finish_slots(std::move(handles));
  };
  self->request(st.nodes[node].owner, control_timeout, allocate_atom::value, msg)
      .then(
          [=](const typed_envelope<wire::AllocateReply>& reply) {
            auto handles = read_as<wire::AllocateReply>(reply, [](wire::AllocateReply::Reader in) {
              std::vector<transport::region_handle> out;
              for (auto h : in.getHandles())
                out.push_back(transport::from_wire(h));
              return out;
            });
            answer(handles ? *handles : std::vector<transport::region_handle>{});
          },
          [=](caf::error&) { answer({}); });
}

} // namespace

void abandon_allocations(master_ptr self, uint32_t node) {
  auto& pending = self->state.allocations;
  std::vector<std::function<void(std::vector<transport::region_handle>)>> owed;
  for (auto i = pending.begin(); i != pending.end();) {
    if (i->second.node != node) {
      ++i;
      continue;
    }
    owed.push_back(std::move(i->second.done));
    i = pending.erase(i);
  }
  if (!owed.empty())
    CRESCENT_PROBE("master.allocation_abandoned");
  for (auto& done : owed) // after the map is consistent: a done may finish a round
    done({});
}

caf::result<typed_envelope<wire::PutStartReply>>
on_put_start(master_ptr self, const typed_envelope<wire::PutStart>& msg) {
  auto& st = self->state;
  auto a = read_as<wire::PutStart>(msg, [](wire::PutStart::Reader in) {
    return put_args{
        in.getNode(),          in.getReplicaCount(),     in.getPlacement(),
        to_keys(in.getKeys()), to_vector(in.getSizes()), to_vector(in.getChainPositions()),
        in.getReplicate()};
  });
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  if (auto err = check(*a))
    return st.bad.refuse(st.name, std::move(err));
  auto round = std::make_shared<put_round>();
  round->args = std::move(*a);
  round->writer = caf::actor_cast<caf::actor_addr>(self->current_sender());
  std::map<uint32_t, std::vector<std::pair<size_t, size_t>>> per_node; // node -> (key, replica)
  std::unordered_set<block_key> seen;
  std::vector<block_key> again; // exist already: produced again, a use as much as a read is
  const bool replicate = round->args.replicate;
  if (replicate && !live(st, round->args.node))
    return st.bad.refuse(
        st.name, make_error(errc::invalid_argument, "a replica goes to a live node of the pool"));
  for (size_t i = 0; i < round->args.keys.size(); ++i) {
    const block_key key = round->args.keys[i];
    if (!seen.insert(key).second)
      continue;
    if (replicate) {
      const auto* r = st.objects->find(key);
      if (replica_wanted(st, r, round->args.node) && r->size_bytes == round->args.sizes[i] &&
          st.replica_puts.count(key) == 0) {
        round->fresh.push_back(key);
        round->fresh_at.push_back(i);
        round->nodes.push_back({round->args.node});
        round->got.emplace_back(1);
        per_node[round->args.node].emplace_back(round->fresh.size() - 1, 0);
      }
      continue;
    }
    if (st.objects->find(key) != nullptr) {
      again.push_back(key);
      continue;
    }
    // Chosen per key, after the previous keys' allocations: a batch spreads over the nodes.
    const auto order = candidates(self, round->args);
    if (order.size() < round->args.replicas)
      continue;
    const size_t k = round->fresh.size();
    round->fresh.push_back(key);
    round->fresh_at.push_back(i);
    round->nodes.emplace_back(order.begin(), order.begin() + round->args.replicas);
    round->got.emplace_back(round->args.replicas);
    for (size_t x = 0; x < round->args.replicas; ++x) {
      per_node[order[x]].emplace_back(k, x);
      st.nodes[order[x]].dram_used_bytes += round->args.sizes[i];
    }
  }
  // Before the allocations: CAF delivers in order per sender, so an owner moves these blocks up
  // before this put's new blocks can make it evict.
  touch_replicas(self, again);
  round->promise = self->make_response_promise<typed_envelope<wire::PutStartReply>>();
  if (per_node.empty()) {
    finish(self, round);
    return round->promise;
  }
  round->outstanding = per_node.size();
  for (auto& [node, slots] : per_node)
    ask_owner(self, round, node, std::move(slots));
  return round->promise;
}

// Group commit: a commit waits in a queue for a flush message that the first one sends to this
// actor. Every commit that arrives before the flush is handled (those already in the mailbox,
// and with many writers those that came while the last sync ran) shares its synced write: one
// fdatasync (about 650 us on this machine's disk) acknowledges them all.
namespace {

// Pending blocks among `keys` that another actor than their writer names: the first refused.
caf::error check_writer(master_ptr self, const std::vector<block_key>& keys, const char* what) {
  auto& st = self->state;
  for (auto key : keys)
    if (auto w = st.writers.find(key); w != st.writers.end())
      if (auto err = refuse_unless_sent_by(self, w->second,
                                           std::string{what} + " of block " + to_string(key),
                                           "the actor whose put started it"))
        return err;
  return caf::none;
}

// Commits granted replicas of existing blocks: each must be one this master granted, on its
// node, with the block's own checksum; then the block has one more replica (written unsynced,
// as replica changes are: a crash may forget it, never claim a copy that is not there).
caf::error commit_replicas(master_ptr self, const std::vector<block_key>& keys,
                           const std::vector<uint64_t>& sums) {
  auto& st = self->state;
  if (keys.size() != sums.size())
    return make_error(errc::invalid_argument, "a commit needs a checksum per key");
  for (auto key : keys)
    if (auto p = st.replica_puts.find(key); p != st.replica_puts.end())
      if (auto err = refuse_unless_sent_by(self, p->second.writer,
                                           "the commit of a replica of block " + to_string(key),
                                           "the actor it was granted to"))
        return err;
  caf::error first;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto p = st.replica_puts.find(keys[i]);
    if (p == st.replica_puts.end()) {
      first = first ? first
                    : make_error(errc::not_found,
                                 "no replica of " + to_string(keys[i]) + " is being written");
      continue;
    }
    const auto granted = p->second;
    st.replica_puts.erase(p);
    const auto* r = st.objects->find(keys[i]);
    if (r == nullptr || r->state != storage::object_state::complete || r->checksum != sums[i]) {
      storage::object_record back;
      back.key = keys[i];
      back.replicas.push_back({granted.node, true, granted.handle, false});
      free_replicas(self, {back});
      first = first ? first
                    : make_error(errc::checksum_mismatch,
                                 "replica of " + to_string(keys[i]) +
                                     " is not the block (gone, or other bytes)");
      continue;
    }
    auto next = r->replicas;
    next.push_back({granted.node, true, granted.handle, false});
    if (auto done = st.objects->set_replicas(keys[i], std::move(next)); !done) {
      first = first ? first : std::move(done.error());
      continue;
    }
    st.objects->note_acknowledged(keys[i]);
    ++st.replicas_added;
  }
  return first;
}

} // namespace

void forget_writers(master_ptr self) {
  auto& st = self->state;
  std::erase_if(st.writers, [&](const auto& w) {
    const auto* r = st.objects->find(w.first);
    return r == nullptr || r->state != storage::object_state::pending;
  });
}

void reclaim_replica_puts(master_ptr self) {
  auto& st = self->state;
  const int64_t now = now_ns(self);
  std::vector<storage::object_record> back;
  for (auto i = st.replica_puts.begin(); i != st.replica_puts.end();) {
    if (i->second.deadline_ns > now) {
      ++i;
      continue;
    }
    storage::object_record r;
    r.key = i->first;
    r.replicas.push_back({i->second.node, true, i->second.handle, false});
    back.push_back(std::move(r));
    i = st.replica_puts.erase(i);
  }
  free_replicas(self, back);
}

caf::result<void> on_put_commit(master_ptr self, const typed_envelope<wire::PutCommit>& msg) {
  auto& st = self->state;
  struct commit_args {
    std::vector<block_key> keys;
    std::vector<uint64_t> sums;
    bool replicas;
  };
  auto c = read_as<wire::PutCommit>(msg, [](wire::PutCommit::Reader in) {
    return commit_args{to_keys(in.getKeys()), to_vector(in.getChecksums()), in.getReplicas()};
  });
  if (!c)
    return st.bad.refuse(st.name, std::move(c.error()));
  if (c->keys.empty() || c->keys.size() > storage::object_store::batch_max)
    return st.bad.refuse(st.name,
                         make_error(errc::invalid_argument, "a commit names 1 to 4096 blocks"));
  if (c->replicas) {
    if (auto err = commit_replicas(self, c->keys, c->sums))
      return err;
    return caf::unit;
  }
  if (auto err = check_writer(self, c->keys, "the commit"))
    return err;
  auto a = std::make_optional(std::make_pair(std::move(c->keys), std::move(c->sums)));
  if (auto err = st.objects->check_commit(a->first, a->second))
    return st.bad.refuse(st.name, std::move(err));
  auto rp = self->make_response_promise<caf::unit_t>();
  st.commits.push_back({std::move(a->first), std::move(a->second), rp});
  if (!st.commit_flush_sent) {
    st.commit_flush_sent = true;
    self->send(self, put_commit_atom::value);
  }
  return rp;
}

void flush_commits(master_ptr self) {
  auto& st = self->state;
  st.commit_flush_sent = false;
  std::vector<block_key> keys;
  std::vector<uint64_t> sums;
  std::unordered_set<block_key> seen;
  std::vector<queued_commit> group;
  size_t taken = 0;
  for (; taken < st.commits.size(); ++taken) {
    auto& c = st.commits[taken];
    if (!group.empty() && keys.size() + c.keys.size() > storage::object_store::batch_max)
      break;
    // Checked again: a sweep or a revoke may have taken its blocks since it arrived.
    auto err = st.objects->check_commit(c.keys, c.checksums);
    for (size_t i = 0; !err && i < c.keys.size(); ++i)
      if (seen.count(c.keys[i]) != 0)
        err = make_error(errc::not_found,
                         "block " + to_string(c.keys[i]) + " is committed by another put");
    if (err) {
      c.promise.deliver(std::move(err));
      continue;
    }
    seen.insert(c.keys.begin(), c.keys.end());
    keys.insert(keys.end(), c.keys.begin(), c.keys.end());
    sums.insert(sums.end(), c.checksums.begin(), c.checksums.end());
    group.push_back(std::move(c));
  }
  st.commits.erase(st.commits.begin(), st.commits.begin() + static_cast<ptrdiff_t>(taken));
  if (!st.commits.empty()) {
    st.commit_flush_sent = true;
    self->send(self, put_commit_atom::value);
  }
  if (group.empty())
    return;
  auto err = st.objects->commit(keys, sums);
  if (!err)
    for (auto key : keys) {
      st.writers.erase(key);
      st.objects->note_acknowledged(key); // acknowledged below, on the nodes it is on now
    }
  for (auto& c : group)
    if (err)
      c.promise.deliver(err);
    else
      c.promise.deliver(caf::unit);
}

caf::result<void> on_put_revoke(master_ptr self, const typed_envelope<wire::PutRevoke>& msg) {
  auto& st = self->state;
  auto keys = read_as<wire::PutRevoke>(
      msg, [](wire::PutRevoke::Reader in) { return to_keys(in.getKeys()); });
  if (!keys)
    return st.bad.refuse(st.name, std::move(keys.error()));
  if (keys->size() > storage::object_store::batch_max)
    return st.bad.refuse(st.name, make_error(errc::limit_exceeded, "revoke of over 4096 keys"));
  if (auto err = check_writer(self, *keys, "the revoke"))
    return err;
  for (auto key : *keys)
    if (auto p = st.replica_puts.find(key); p != st.replica_puts.end())
      if (auto err = refuse_unless_sent_by(self, p->second.writer,
                                           "the revoke of a replica of block " + to_string(key),
                                           "the actor it was granted to"))
        return err;
  for (auto key : *keys)
    st.writers.erase(key);
  auto back = st.objects->revoke(*keys);
  for (auto key : *keys)
    if (auto p = st.replica_puts.find(key); p != st.replica_puts.end()) {
      storage::object_record r;
      r.key = key;
      r.replicas.push_back({p->second.node, true, p->second.handle, false});
      back.push_back(std::move(r));
      st.replica_puts.erase(p);
    }
  free_replicas(self, back);
  return caf::unit;
}

} // namespace crescent
