// Reads and block management: get (with promotion of SSD-only blocks and a read lease),
// exists, remove, pins, and reports of corrupt replicas.
#include "actors/common/timeouts.hpp"
#include "actors/store_master/master_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <unordered_set>

namespace crescent {

bool live(const master_state& st, uint32_t node) {
  return node < st.nodes.size() && st.nodes[node].alive;
}

availability available(const master_state& st, const storage::object_record* r) {
  if (r == nullptr || r->state != storage::object_state::complete)
    return availability::none;
  bool ssd = false;
  for (const auto& x : r->replicas) {
    if (!live(st, x.node))
      continue;
    if (x.in_dram)
      return availability::dram;
    ssd = ssd || x.on_ssd;
  }
  return ssd ? availability::ssd : availability::none;
}

namespace {

caf::error check_keys(size_t n) {
  if (n == 0 || n > storage::object_store::batch_max)
    return make_error(errc::limit_exceeded, "a request names 1 to 4096 blocks");
  return caf::none;
}

struct get_args {
  std::vector<block_key> keys;
  bool prefix_only = false;
  uint32_t reader = UINT32_MAX; // none
  bool pull = true;
};

// The SSD copy of `r` to read back for this get: the reader's own, else (for a reader that
// pulls, or none) the first live one; nullopt: none to read.
std::optional<uint32_t> ssd_copy_to_read(master_ptr self, const storage::object_record& r,
                                         const get_args& a) {
  std::optional<uint32_t> first;
  for (const auto& x : r.replicas) {
    if (!x.on_ssd || !live(self->state, x.node))
      continue;
    if (x.node == a.reader)
      return x.node;
    if (!first)
      first = x.node;
  }
  const bool known_reader = a.reader < self->state.nodes.size();
  return known_reader && !a.pull ? std::nullopt : first;
}

// Answers a get from the current metadata; leases what it returns. `promoted`: the blocks this
// get read back from SSD.
typed_envelope<wire::GetReply> answer(master_ptr self, const get_args& a,
                                      const std::unordered_set<block_key>& promoted = {}) {
  auto& st = self->state;
  const int64_t until =
      now_ns(self) +
      std::chrono::duration_cast<std::chrono::nanoseconds>(st.options.lease_ttl).count();
  std::vector<block_key> shown;
  std::vector<block_key> used; // returned with DRAM replicas: the owners hear of it
  std::unordered_set<block_key> seen;
  for (auto key : a.keys) {
    const bool in_dram = available(st, st.objects->find(key)) == availability::dram;
    if (!in_dram && a.prefix_only)
      break;
    shown.push_back(key);
    if (in_dram && seen.insert(key).second) // a key named twice is still one use
      used.push_back(key);
  }
  touch_replicas(self, used);
  return make_envelope<wire::GetReply>([&](wire::GetReply::Builder out) {
    auto blocks = out.initBlocks(static_cast<unsigned>(shown.size()));
    for (unsigned i = 0; i < shown.size(); ++i) {
      write_key(blocks[i].initKey(), shown[i]);
      const auto* r = st.objects->find(shown[i]);
      if (available(st, r) != availability::dram)
        continue;
      st.objects->lease(shown[i], until);
      blocks[i].setSizeBytes(r->size_bytes);
      blocks[i].setChecksum(r->checksum);
      blocks[i].setLeaseUntilNs(until);
      blocks[i].setFromSsd(promoted.contains(shown[i]));
      std::vector<transport::region_handle> in_dram;
      for (const auto& x : r->replicas)
        if (x.in_dram && live(st, x.node))
          in_dram.push_back(x.dram);
      auto list = blocks[i].initReplicas(static_cast<unsigned>(in_dram.size()));
      for (unsigned k = 0; k < in_dram.size(); ++k)
        transport::to_wire(in_dram[k], list[k]);
    }
  });
}

// Records where a promoted block now sits in DRAM.
void promoted(master_ptr self, uint32_t node, block_key key, const transport::region_handle& h) {
  auto& st = self->state;
  const auto* r = st.objects->find(key);
  if (r == nullptr || !h.valid())
    return;
  auto next = r->replicas;
  for (auto& x : next)
    if (x.node == node && x.on_ssd) {
      x.in_dram = true;
      x.dram = h;
    }
  [[maybe_unused]] auto done = st.objects->set_replicas(key, std::move(next));
}

// Takes `node`'s replicas out of a complete block's record, for a copy that is bad or gone; a
// block left without replicas is forgotten and counted lost. Returns the record as it was with
// only the replicas taken (none: nothing to take).
caf::expected<std::optional<storage::object_record>> take_replicas(master_ptr self, block_key key,
                                                                   uint32_t node) {
  auto& st = self->state;
  const auto* r = st.objects->find(key);
  if (r == nullptr || r->state != storage::object_state::complete)
    return std::nullopt; // already gone: several readers may report the same replica
  storage::object_record taken = *r;
  taken.replicas.clear();
  std::vector<storage::replica> keep;
  for (const auto& x : r->replicas)
    (x.node == node ? taken.replicas : keep).push_back(x);
  if (taken.replicas.empty())
    return std::nullopt;
  auto gone = st.objects->set_replicas(key, std::move(keep));
  if (!gone)
    return std::move(gone.error());
  count_lost(st, *gone);
  return taken;
}

struct promote_outcome {
  std::vector<transport::region_handle> handles;
  std::vector<bool> lost; // empty: none
};

} // namespace

caf::result<typed_envelope<wire::GetReply>> on_get(master_ptr self,
                                                   const typed_envelope<wire::Get>& msg) {
  auto& st = self->state;
  auto a = read_as<wire::Get>(msg, [](wire::Get::Reader in) {
    return get_args{to_keys(in.getKeys()), in.getPrefixOnly(), in.getReader(), in.getPull()};
  });
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  if (auto err = check_keys(a->keys.size()))
    return st.bad.refuse(st.name, std::move(err));
  // Blocks only on SSD are promoted first (the prefix up to the first missing block).
  std::map<uint32_t, std::vector<block_key>> promote;
  for (auto key : a->keys) {
    const auto* r = st.objects->find(key);
    auto where = available(st, r);
    if (where == availability::none && a->prefix_only)
      break;
    if (where != availability::ssd)
      continue;
    if (auto node = ssd_copy_to_read(self, *r, *a))
      promote[*node].push_back(key);
    else if (a->prefix_only)
      break; // the reader cannot use it: the prefix ends here
  }
  if (promote.empty())
    return answer(self, *a);
  auto rp = self->make_response_promise<typed_envelope<wire::GetReply>>();
  auto outstanding = std::make_shared<size_t>(promote.size());
  auto promoted_keys = std::make_shared<std::unordered_set<block_key>>();
  for (auto& [node, keys] : promote) {
    auto req = make_envelope<wire::Promote>([&](wire::Promote::Builder out) {
      write_keys(out.initKeys(static_cast<unsigned>(keys.size())), keys);
    });
    auto done = [=, node = node, keys = keys](promote_outcome o) mutable {
      for (size_t i = 0; i < keys.size() && i < o.handles.size(); ++i) {
        promoted(self, node, keys[i], o.handles[i]);
        if (o.handles[i].valid())
          promoted_keys->insert(keys[i]);
      }
      for (size_t i = 0; i < keys.size() && i < o.lost.size(); ++i)
        if (o.lost[i])
          if (auto taken = take_replicas(self, keys[i], node); !taken)
            spdlog::error("store_master: dropping a replica of {}: {}", to_string(keys[i]),
                          describe(taken.error()));
      if (--*outstanding == 0)
        rp.deliver(answer(self, *a, *promoted_keys));
    };
    self->request(st.nodes[node].owner, control_timeout, promote_atom::value, req)
        .then(
            [=](const typed_envelope<wire::PromoteReply>& reply) mutable {
              auto o = read_as<wire::PromoteReply>(reply, [](wire::PromoteReply::Reader in) {
                promote_outcome out;
                for (auto x : in.getHandles())
                  out.handles.push_back(transport::from_wire(x));
                for (auto x : in.getLost())
                  out.lost.push_back(x);
                return out;
              });
              done(o ? std::move(*o) : promote_outcome{});
            },
            [=](caf::error&) mutable { done({}); });
  }
  return rp;
}

caf::result<typed_envelope<wire::ExistsReply>> on_exists(master_ptr self,
                                                         const typed_envelope<wire::Exists>& msg) {
  auto& st = self->state;
  auto keys =
      read_as<wire::Exists>(msg, [](wire::Exists::Reader in) { return to_keys(in.getKeys()); });
  if (!keys)
    return st.bad.refuse(st.name, std::move(keys.error()));
  if (auto err = check_keys(keys->size()))
    return st.bad.refuse(st.name, std::move(err));
  return make_envelope<wire::ExistsReply>([&](wire::ExistsReply::Builder out) {
    auto list = out.initPresent(static_cast<unsigned>(keys->size()));
    for (unsigned i = 0; i < keys->size(); ++i)
      list.set(i, available(st, st.objects->find((*keys)[i])) != availability::none);
  });
}

caf::result<void> on_remove(master_ptr self, const typed_envelope<wire::Remove>& msg) {
  auto& st = self->state;
  auto keys =
      read_as<wire::Remove>(msg, [](wire::Remove::Reader in) { return to_keys(in.getKeys()); });
  if (!keys)
    return st.bad.refuse(st.name, std::move(keys.error()));
  if (auto err = check_keys(keys->size()))
    return st.bad.refuse(st.name, std::move(err));
  auto gone = st.objects->remove(*keys, now_ns(self));
  if (!gone)
    return std::move(gone.error());
  free_replicas(self, *gone);
  return caf::unit;
}

namespace {

struct pin_args {
  std::vector<block_key> keys;
  bool hard = false;
  uint32_t ttl_ms = 0;
};

caf::result<void> apply_pins(master_ptr self, caf::expected<pin_args> a, bool pin) {
  auto& st = self->state;
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  if (auto err = check_keys(a->keys.size()))
    return st.bad.refuse(st.name, std::move(err));
  const int64_t until = now_ns(self) + int64_t{a->ttl_ms} * 1000000;
  caf::error first;
  for (auto key : a->keys) {
    auto err = pin ? st.objects->pin(key, a->hard, until) : st.objects->unpin(key);
    if (err && !first)
      first = std::move(err);
  }
  if (first)
    return first;
  return caf::unit;
}

} // namespace

caf::result<void> on_pin(master_ptr self, const typed_envelope<wire::Pin>& msg) {
  return apply_pins(
      self,
      read_as<wire::Pin>(msg,
                         [](wire::Pin::Reader in) {
                           return pin_args{to_keys(in.getKeys()), in.getHard(), in.getTtlMs()};
                         }),
      true);
}

caf::result<void> on_unpin(master_ptr self, const typed_envelope<wire::Unpin>& msg) {
  return apply_pins(self,
                    read_as<wire::Unpin>(msg,
                                         [](wire::Unpin::Reader in) {
                                           return pin_args{to_keys(in.getKeys()), false, 0};
                                         }),
                    false);
}

caf::result<void> on_corrupt(master_ptr self, const typed_envelope<wire::ReportCorrupt>& msg) {
  auto& st = self->state;
  auto a = read_as<wire::ReportCorrupt>(msg, [](wire::ReportCorrupt::Reader in) {
    return std::make_pair(read_key(in.getKey()), in.getNode());
  });
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  const auto [key, node] = *a;
  const auto* r = st.objects->find(key);
  if (r == nullptr || r->state != storage::object_state::complete)
    return caf::unit; // already gone: several readers may report the same replica
  ++st.corrupt_reports;
  auto drop = [self, key, node]() -> caf::error {
    auto taken = take_replicas(self, key, node);
    if (!taken)
      return std::move(taken.error());
    // The bad copy's space goes back; without leases on it now, nobody reads it any more.
    if (*taken)
      free_replicas(self, {**taken});
    return caf::none;
  };
  // The owner reporting its own copy knows; a reader only saw bytes that may have changed on
  // their way (a link, a faulty NIC): the owner checks its copy before the replica is dropped,
  // so that damage in transit never costs the pool a good copy. No answer (the ask or its
  // answer lost, the owner slow): kept. Dropping it then lost acknowledged two-replica blocks
  // with no node lost, when both copies were read through a lossy, corrupting link (crescent
  // chaos seed 60000 of docs/chaos/corrupt_drop.budget.yaml). Keeping a copy that is in fact
  // bad costs a reader a miss, never wrong bytes (every read checks the block's checksum), and
  // the next report asks again; an owner that is gone loses its replicas with its node.
  if (node >= st.nodes.size() || !st.nodes[node].alive || !st.nodes[node].owner ||
      sent_by(self, st.nodes[node].owner.address())) {
    if (auto err = drop())
      return err;
    return caf::unit;
  }
  auto rp = self->make_response_promise<caf::unit_t>();
  const auto ask = make_envelope<wire::VerifyBlock>([&](wire::VerifyBlock::Builder out) {
    write_key(out.initKey(), key);
    out.setChecksum(r->checksum);
  });
  self->request(st.nodes[node].owner, control_timeout, verify_atom::value, ask)
      .then(
          [=](const typed_envelope<wire::VerifyReply>& reply) mutable {
            auto intact = read_as<wire::VerifyReply>(
                reply, [](wire::VerifyReply::Reader in) { return in.getIntact(); });
            auto err = !intact || !*intact ? drop() : caf::error{};
            if (intact && *intact)
              ++self->state.intact_on_verify;
            if (err)
              rp.deliver(std::move(err));
            else
              rp.deliver(caf::unit);
          },
          [=](caf::error&) mutable {
            ++self->state.unverified_reports;
            rp.deliver(caf::unit);
          });
  return rp;
}

} // namespace crescent
