// DRAM space for the store master: allocation, freeing, promotion from SSD.
#include "actors/block_owner/owner_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "transport/region_handle.hpp"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace crescent {

namespace {

struct allocate_args {
  std::vector<block_key> keys;
  std::vector<uint64_t> sizes;
  std::vector<uint32_t> positions;
};

caf::error check_count(size_t n) {
  if (n == 0 || n > owner_batch_max)
    return make_error(errc::limit_exceeded, "a batch names 1 to 4096 blocks");
  return caf::none;
}

typed_envelope<wire::AllocateReply>
allocate_reply(const std::vector<transport::region_handle>& handles) {
  return make_envelope<wire::AllocateReply>([&](wire::AllocateReply::Builder out) {
    auto list = out.initHandles(static_cast<unsigned>(handles.size()));
    for (unsigned i = 0; i < handles.size(); ++i)
      transport::to_wire(handles[i], list[i]);
  });
}

typed_envelope<wire::PromoteReply>
promote_reply(const std::vector<transport::region_handle>& handles, const std::vector<bool>& lost) {
  return make_envelope<wire::PromoteReply>([&](wire::PromoteReply::Builder out) {
    auto list = out.initHandles(static_cast<unsigned>(handles.size()));
    for (unsigned i = 0; i < handles.size(); ++i)
      transport::to_wire(handles[i], list[i]);
    if (std::find(lost.begin(), lost.end(), true) == lost.end())
      return;
    auto flags = out.initLost(static_cast<unsigned>(lost.size()));
    for (unsigned i = 0; i < lost.size(); ++i)
      flags.set(i, lost[i]);
  });
}

// How much of the arena puts may fill: all but the promotion reserve, when the eviction
// watermark lies below that.
uint64_t put_limit_bytes(const owner_state& st) {
  const double capacity = static_cast<double>(st.parts.dram->capacity_bytes());
  const double keep = 1.0 - st.options.promotion_reserve;
  if (st.options.high_watermark >= keep)
    return st.parts.dram->capacity_bytes();
  return static_cast<uint64_t>(keep * capacity);
}

// A DRAM copy for `key`, from the arena; nothing when the arena is full.
std::optional<transport::region_handle> place(owner_ptr self, block_key key, owned_block& b,
                                              uint32_t position) {
  auto& st = self->state;
  auto space = st.parts.dram->allocate(b.size_bytes);
  if (!space) {
    // Full is load (eviction makes room); no slot for the block's grant is a limit of the
    // transfer engine's region table that eviction also frees, but one to see in the log.
    if (!is(space.error(), errc::no_space))
      spdlog::warn("block_owner {}: {}", st.options.node, describe(space.error()));
    return std::nullopt;
  }
  b.dram = *space;
  st.order->insert(key, b.size_bytes, position);
  return space->handle;
}

} // namespace

caf::expected<transport::region_handle> promote(owner_ptr self, block_key key, uint64_t& read_ns) {
  auto& st = self->state;
  auto i = st.blocks.find(key);
  if (i == st.blocks.end() || i->second.freed)
    return make_error(errc::not_found, "no such block");
  auto& b = i->second;
  if (b.dram)
    return b.dram->handle;
  if (!b.on_ssd || !st.parts.ssd)
    return make_error(errc::not_found, "no copy of the block");
  auto h = place(self, key, b, 0);
  if (!h)
    return make_error(errc::no_space, "no DRAM room to promote into"); // try again later
  auto err = st.parts.ssd->get(key, st.parts.dram->bytes(*b.dram, b.size_bytes));
  if (!err) {
    ++st.promotions;
    if (st.parts.ssd_modeled_ns) {
      // Not a victim before the master learns of the copy, when the modeled read has ended.
      const uint64_t ns = st.parts.ssd_modeled_ns(b.size_bytes, false);
      read_ns = std::max(read_ns, ns);
      b.refused_until_ns = std::max(b.refused_until_ns, clock_ns(self) + static_cast<int64_t>(ns));
    }
    return *h;
  }
  // The SSD copy cannot be read (an I/O error, a short file, a bad checksum): it is gone for
  // good. Forget it here, and say so, so that the master drops the replica instead of asking
  // again on every get.
  note_ssd_error(self, false, key, err);
  release_dram(self, key, b);
  if (auto gone = st.parts.ssd->remove(key))
    spdlog::warn("block_owner {}: {}", st.options.node, describe(gone));
  st.blocks.erase(i);
  return make_error(errc::io_error, describe(err));
}

void release_dram(owner_ptr self, block_key key, owned_block& b) {
  auto& st = self->state;
  if (b.dram) {
    st.parts.dram->free(*b.dram);
    b.dram.reset();
  }
  st.order->erase(key);
}

caf::result<typed_envelope<wire::AllocateReply>>
on_allocate(owner_ptr self, const typed_envelope<wire::Allocate>& msg) {
  auto& st = self->state;
  auto a = read_as<wire::Allocate>(msg, [](wire::Allocate::Reader in) {
    return allocate_args{to_keys(in.getKeys()), to_vector(in.getSizes()),
                         to_vector(in.getChainPositions())};
  });
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  if (auto err = check_count(a->keys.size()))
    return st.bad.refuse(st.name, std::move(err));
  if (a->sizes.size() != a->keys.size() || a->positions.size() != a->keys.size())
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "allocate needs a size and a position per key"));
  for (auto size : a->sizes)
    if (size == 0 || size > st.parts.dram->capacity_bytes())
      return st.bad.refuse(
          st.name, make_error(errc::invalid_argument, "a block must fit in this node's DRAM tier"));
  std::vector<transport::region_handle> out;
  for (size_t i = 0; i < a->keys.size(); ++i) {
    auto& b = st.blocks[a->keys[i]];
    if (b.evicting) {
      out.emplace_back(); // its old copy is still at the master for eviction: not now
      continue;
    }
    if (b.dram) {
      out.push_back(b.dram->handle); // asked twice: the same space
      continue;
    }
    b.size_bytes = a->sizes[i];
    auto h = st.parts.dram->used_bytes() + b.size_bytes <= put_limit_bytes(st)
                 ? place(self, a->keys[i], b, a->positions[i])
                 : std::nullopt;
    if (!h && !b.on_ssd)
      st.blocks.erase(a->keys[i]);
    out.push_back(h ? *h : transport::region_handle{});
  }
  maybe_evict(self);
  return allocate_reply(out);
}

caf::result<void> on_free(owner_ptr self, const typed_envelope<wire::FreeBlocks>& msg) {
  auto& st = self->state;
  auto keys = read_as<wire::FreeBlocks>(
      msg, [](wire::FreeBlocks::Reader in) { return to_keys(in.getKeys()); });
  if (!keys)
    return st.bad.refuse(st.name, std::move(keys.error()));
  if (auto err = check_count(keys->size()))
    return st.bad.refuse(st.name, std::move(err));
  for (auto key : *keys) {
    auto i = st.blocks.find(key);
    if (i == st.blocks.end())
      continue; // freed twice, or never held: nothing to do
    if (i->second.evicting) {
      i->second.freed = true; // the eviction reply finishes the job
      continue;
    }
    release_dram(self, key, i->second);
    if (i->second.on_ssd && st.parts.ssd)
      if (auto err = st.parts.ssd->remove(key))
        spdlog::warn("block_owner {}: {}", st.options.node, describe(err));
    st.blocks.erase(i);
  }
  return caf::unit;
}

caf::result<typed_envelope<wire::PromoteReply>>
on_promote(owner_ptr self, const typed_envelope<wire::Promote>& msg) {
  auto& st = self->state;
  auto keys =
      read_as<wire::Promote>(msg, [](wire::Promote::Reader in) { return to_keys(in.getKeys()); });
  if (!keys)
    return st.bad.refuse(st.name, std::move(keys.error()));
  if (auto err = check_count(keys->size()))
    return st.bad.refuse(st.name, std::move(err));
  if (st.promotions_waiting.size() >= promotions_waiting_max)
    return make_error(errc::limit_exceeded, "too many promotions wait for the modeled SSD");
  std::vector<transport::region_handle> out;
  std::vector<bool> lost;
  uint64_t read_ns = 0; // 0 in real time: the reads took their time inside promote()
  for (auto key : *keys) {
    auto h = promote(self, key, read_ns);
    out.push_back(h ? *h : transport::region_handle{});
    lost.push_back(!h && !is(h.error(), errc::no_space));
  }
  maybe_evict(self);
  if (read_ns == 0)
    return promote_reply(out, lost);
  // Simulated time: answered when the modeled drive has read the blocks.
  const uint64_t id = st.next_promotion++;
  auto& w = st.promotions_waiting[id];
  w.promise = self->make_response_promise<typed_envelope<wire::PromoteReply>>();
  w.reply = promote_reply(out, lost);
  self->delayed_send(self, std::chrono::nanoseconds(read_ns), promote_atom::value, id);
  return w.promise;
}

void on_promoted(owner_ptr self, uint64_t id) {
  auto& st = self->state;
  if (refuse_unless_self_sent(self, "a promotion's end"))
    return;
  auto i = st.promotions_waiting.find(id);
  if (i == st.promotions_waiting.end())
    return;
  i->second.promise.deliver(std::move(i->second.reply));
  st.promotions_waiting.erase(i);
}

} // namespace crescent
