// Keeping DRAM under the high watermark: victims by policy, offload to SSD when it has room,
// and the store master's approval before a DRAM copy is dropped. The order learns of uses from
// the master's touches (reads are one-sided: the owner never sees them).
#include "actors/block_owner/owner_state.hpp"
#include "actors/common/timeouts.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "storage/checksum.hpp"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

constexpr size_t victims_per_round_max = 1024;

// Where a victim's SSD copy comes from: none, one from before (a promoted block), or one
// written for this eviction.
enum class ssd_copy : uint8_t { none, kept, written };

// Copies a victim to SSD if the tier exists and has room.
ssd_copy offload(owner_ptr self, uint64_t key, owned_block& b) {
  auto& st = self->state;
  if (b.on_ssd)
    return ssd_copy::kept;
  if (!st.parts.ssd || st.parts.ssd->capacity_bytes() - st.parts.ssd->used_bytes() < b.size_bytes)
    return ssd_copy::none;
  auto bytes = st.parts.dram->bytes(*b.dram, b.size_bytes);
  if (auto err = st.parts.ssd->put(key, bytes, storage::block_checksum(bytes))) {
    // Disk full or an I/O error: the block is evicted without a copy (a miss later, never a
    // claim of a copy that is not there), and the failure shows in the owner's statistics.
    note_ssd_error(self, true, key, err);
    return ssd_copy::none;
  }
  b.on_ssd = true;
  ++st.offloads;
  return ssd_copy::written;
}

void apply(owner_ptr self, const std::vector<uint64_t>& keys, const std::vector<ssd_copy>& copies,
           const std::vector<bool>& approved) {
  auto& st = self->state;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = st.blocks.find(keys[i]);
    if (it == st.blocks.end())
      continue;
    auto& b = it->second;
    b.evicting = false;
    const bool drop = b.freed || (i < approved.size() && approved[i]);
    if (!drop) {
      // Refused (leased, pinned, pending): keep DRAM, and no second copy the master ignores. A
      // copy from before stays: the master knows it, and the disk may have no room for another.
      if (copies[i] == ssd_copy::written && st.parts.ssd &&
          st.parts.ssd->remove(keys[i]) == caf::none)
        b.on_ssd = false;
      continue;
    }
    ++st.evictions;
    release_dram(self, keys[i], b);
    if (b.freed || !b.on_ssd) {
      if (b.on_ssd && st.parts.ssd) [[maybe_unused]]
        auto err = st.parts.ssd->remove(keys[i]);
      st.blocks.erase(it);
    }
  }
}

void ask_master(owner_ptr self, std::vector<uint64_t> keys, std::vector<ssd_copy> copies) {
  auto& st = self->state;
  auto msg = make_envelope<wire::EvictRequest>([&](wire::EvictRequest::Builder out) {
    out.setNode(st.options.node);
    auto k = out.initKeys(static_cast<unsigned>(keys.size()));
    auto o = out.initOffloaded(static_cast<unsigned>(keys.size()));
    for (unsigned i = 0; i < keys.size(); ++i) {
      k.set(i, keys[i]);
      o.set(i, copies[i] != ssd_copy::none);
    }
  });
  st.evicting = true;
  self->request(st.parts.master, control_timeout, evict_atom::value, msg)
      .then(
          [=](const envelope& reply) {
            auto approved = read_as<wire::EvictReply>(reply, [](wire::EvictReply::Reader in) {
              std::vector<bool> out;
              for (auto a : in.getApproved())
                out.push_back(a);
              return out;
            });
            apply(self, keys, copies, approved ? *approved : std::vector<bool>{});
            self->state.evicting = false;
            // Keep going while above the watermark, but only if this round freed something:
            // a round of refusals waits for the next allocation.
            if (approved && std::find(approved->begin(), approved->end(), true) != approved->end())
              maybe_evict(self);
          },
          [=](caf::error& err) {
            spdlog::warn("block_owner {}: eviction not approved: {}", self->state.options.node,
                         describe(err));
            apply(self, keys, copies, {});
            self->state.evicting = false;
          });
}

} // namespace

void note_ssd_error(owner_ptr self, bool write, uint64_t key, const caf::error& err) {
  auto& st = self->state;
  ++(write ? st.ssd_write_errors : st.ssd_read_errors);
  st.last_ssd_error =
      fmt::format("{} of block {}: {}", write ? "SSD write" : "SSD read", key, describe(err));
  if (st.last_ssd_error.size() > ssd_error_text_max)
    st.last_ssd_error.resize(ssd_error_text_max);
  // Once per power of two: a full disk fails every offload, and the log must stay readable.
  const uint64_t n = write ? st.ssd_write_errors : st.ssd_read_errors;
  if ((n & (n - 1)) == 0)
    spdlog::warn("block_owner {}: {} (failure {} of this kind)", st.options.node, st.last_ssd_error,
                 n);
}

void on_touch(owner_ptr self, const envelope& msg) {
  auto& st = self->state;
  // Only the master knows which blocks were read; anyone else could keep blocks of its choice
  // in DRAM by touching them.
  if (!st.parts.master ||
      self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(st.parts.master)) {
    st.bad.refuse(st.name,
                  make_error(errc::access_denied, "a touch must come from the store master"));
    return;
  }
  auto keys =
      read_as<wire::Touch>(msg, [](wire::Touch::Reader in) { return to_vector(in.getKeys()); });
  if (!keys) {
    st.bad.refuse(st.name, std::move(keys.error()));
    return;
  }
  if (keys->empty() || keys->size() > owner_batch_max) {
    st.bad.refuse(st.name, make_error(errc::limit_exceeded, "a touch names 1 to 4096 blocks"));
    return;
  }
  // Blocks gone meanwhile (evicted, freed) or only on SSD are not in the order: nothing to do.
  for (auto key : *keys)
    if (auto i = st.blocks.find(key); i != st.blocks.end() && i->second.dram)
      st.order->touch(key);
}

void maybe_evict(owner_ptr self) {
  auto& st = self->state;
  const double capacity = static_cast<double>(st.parts.dram->capacity_bytes());
  const double used = static_cast<double>(st.parts.dram->used_bytes());
  if (st.evicting || !st.parts.master || used <= st.options.high_watermark * capacity)
    return;
  const double goal = (st.options.high_watermark - st.options.evict_fraction) * capacity;
  const auto bytes = static_cast<uint64_t>(used - goal);
  auto victims = st.order->victims(bytes, victims_per_round_max, [&](uint64_t key) {
    auto i = st.blocks.find(key);
    return i == st.blocks.end() || i->second.evicting || !i->second.dram;
  });
  if (victims.empty())
    return;
  std::vector<ssd_copy> copies;
  for (auto key : victims) {
    auto& b = st.blocks.at(key);
    b.evicting = true;
    copies.push_back(offload(self, key, b));
  }
  ask_master(self, std::move(victims), std::move(copies));
}

} // namespace crescent
