// Keeping DRAM under the high watermark: victims by policy, the store master's approval before
// a DRAM copy is dropped, and only then the offload to SSD where it has room. A victim the
// master refuses (leased, pinned, pending) steps aside for a while: the head of the order
// cannot hold eviction up, and nothing is written to disk for a refusal. The order learns of uses
// from the master's touches (reads are one-sided: the owner never sees them).
#include "actors/block_owner/owner_state.hpp"
#include "actors/common/code_probe.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/store_master/pool_protocol.hpp"
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
constexpr std::chrono::milliseconds refusal_backoff_min{500};
constexpr std::chrono::milliseconds refusal_backoff_max{60'000};

// Whether a victim goes to SSD: it is there already, or the tier has room for it beside the
// round's other victims (`reserved`). Nothing is written before the master approves.
bool wants_ssd(owner_ptr self, const owned_block& b, uint64_t& reserved) {
  auto& st = self->state;
  if (b.on_ssd)
    return true;
  if (!st.parts.ssd)
    return false;
  const uint64_t room = st.parts.ssd->capacity_bytes() - st.parts.ssd->used_bytes();
  if (room < reserved + b.size_bytes)
    return false;
  reserved += b.size_bytes;
  return true;
}

// Copies an approved victim to SSD. Disk full or an I/O error: the block goes without a copy,
// and the master, which already recorded one, is told (a miss later, never a claim of a copy
// that is not there); the failure shows in the owner's statistics.
bool offload(owner_ptr self, block_key key, owned_block& b) {
  auto& st = self->state;
  if (b.on_ssd)
    return true;
  auto bytes = st.parts.dram->bytes(*b.dram, b.size_bytes);
  if (auto err = st.parts.ssd ? st.parts.ssd->put(key, bytes, storage::block_checksum(bytes))
                              : make_error(errc::not_found, "no SSD tier");
      err) {
    note_ssd_error(self, true, key, err);
    self->request(st.parts.master, control_timeout, corrupt_atom::value,
                  pool_protocol::make_report_corrupt(key, st.options.node))
        .then([] {}, [](caf::error&) {});
    return false;
  }
  b.on_ssd = true;
  ++st.offloads;
  // Simulated time: the modeled write holds the drive (reads go beside it), not the DRAM copy.
  if (st.parts.ssd_modeled_ns)
    st.parts.ssd_modeled_ns(b.size_bytes, true);
  return true;
}

// A refused victim steps aside: 0.5 s, then twice as long at each refusal in a row (at most a
// minute), so that the next round asks for the blocks after it.
void step_aside(owner_ptr self, owned_block& b) {
  CRESCENT_PROBE("owner.victim_steps_aside");
  auto& st = self->state;
  const auto wait = std::min<std::chrono::milliseconds>(
      refusal_backoff_max, refusal_backoff_min * (int64_t{1} << std::min<uint32_t>(b.refusals, 7)));
  b.refused_until_ns =
      clock_ns(self) + std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
  ++b.refusals;
  ++st.eviction_refusals;
}

// The master's answer: approved victims leave DRAM (to SSD first, where intended); refused ones
// step aside. No answer (`approved` empty): they stay, and may be asked for again at once.
void apply(owner_ptr self, const std::vector<block_key>& keys, const std::vector<bool>& to_ssd,
           const std::vector<bool>& approved, bool answered) {
  auto& st = self->state;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = st.blocks.find(keys[i]);
    if (it == st.blocks.end())
      continue;
    auto& b = it->second;
    b.evicting = false;
    const bool yes = i < approved.size() && approved[i];
    if (!b.freed && !yes) {
      if (answered)
        step_aside(self, b);
      continue;
    }
    b.refusals = 0;
    const bool kept = !b.freed && to_ssd[i] && offload(self, keys[i], b);
    ++st.evictions;
    release_dram(self, keys[i], b);
    if (!kept) {
      if (b.on_ssd && st.parts.ssd) [[maybe_unused]]
        auto err = st.parts.ssd->remove(keys[i]);
      st.blocks.erase(it);
    }
  }
}

void ask_master(owner_ptr self, std::vector<block_key> keys, std::vector<bool> to_ssd) {
  auto& st = self->state;
  auto msg = make_envelope<wire::EvictRequest>([&](wire::EvictRequest::Builder out) {
    out.setNode(st.options.node);
    auto k = out.initKeys(static_cast<unsigned>(keys.size()));
    auto o = out.initOffloaded(static_cast<unsigned>(keys.size()));
    for (unsigned i = 0; i < keys.size(); ++i) {
      write_key(k[i], keys[i]);
      o.set(i, to_ssd[i]);
    }
  });
  st.evicting = true;
  self->request(st.parts.master, control_timeout, evict_atom::value, msg)
      .then(
          [=](const typed_envelope<wire::EvictReply>& reply) {
            auto approved = read_as<wire::EvictReply>(reply, [](wire::EvictReply::Reader in) {
              std::vector<bool> out;
              for (auto a : in.getApproved())
                out.push_back(a);
              return out;
            });
            apply(self, keys, to_ssd, approved ? *approved : std::vector<bool>{}, bool(approved));
            self->state.evicting = false;
            // Keep going while above the watermark: refused blocks stepped aside, so the next
            // round asks for others, until none is left to ask for.
            if (approved)
              maybe_evict(self);
          },
          [=](caf::error& err) {
            spdlog::warn("block_owner {}: eviction not approved: {}", self->state.options.node,
                         describe(err));
            apply(self, keys, to_ssd, {}, false);
            self->state.evicting = false;
          });
}

} // namespace

void note_ssd_error(owner_ptr self, bool write, block_key key, const caf::error& err) {
  auto& st = self->state;
  ++(write ? st.ssd_write_errors : st.ssd_read_errors);
  st.last_ssd_error = fmt::format("{} of block {}: {}", write ? "SSD write" : "SSD read",
                                  to_string(key), describe(err));
  if (st.last_ssd_error.size() > ssd_error_text_max)
    st.last_ssd_error.resize(ssd_error_text_max);
  // Once per power of two: a full disk fails every offload, and the log must stay readable.
  const uint64_t n = write ? st.ssd_write_errors : st.ssd_read_errors;
  if ((n & (n - 1)) == 0)
    spdlog::warn("block_owner {}: {} (failure {} of this kind)", st.options.node, st.last_ssd_error,
                 n);
}

void on_touch(owner_ptr self, const typed_envelope<wire::Touch>& msg) {
  auto& st = self->state;
  // Only the master knows which blocks were read; anyone else could keep blocks of its choice
  // in DRAM by touching them.
  if (refuse_unless_sent_by(self, caf::actor_cast<caf::actor_addr>(st.parts.master), "a touch",
                            "the store master"))
    return;
  auto keys =
      read_as<wire::Touch>(msg, [](wire::Touch::Reader in) { return to_keys(in.getKeys()); });
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

caf::result<typed_envelope<wire::VerifyReply>>
on_verify(owner_ptr self, const typed_envelope<wire::VerifyBlock>& msg) {
  auto& st = self->state;
  // Only the master acts on the answer (it keeps or drops the replica); a check costs a pass
  // over the block's bytes, which nobody else may make this actor spend.
  if (auto err = refuse_unless_sent_by(self, caf::actor_cast<caf::actor_addr>(st.parts.master),
                                       "a verify", "the store master"))
    return err;
  auto a = read_as<wire::VerifyBlock>(msg, [](wire::VerifyBlock::Reader in) {
    return std::make_pair(read_key(in.getKey()), in.getChecksum());
  });
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  bool intact = false;
  if (auto i = st.blocks.find(a->first); i != st.blocks.end() && i->second.dram)
    intact = storage::block_checksum(st.parts.dram->bytes(*i->second.dram, i->second.size_bytes)) ==
             a->second;
  return make_envelope<wire::VerifyReply>(
      [&](wire::VerifyReply::Builder out) { out.setIntact(intact); });
}

void maybe_evict(owner_ptr self) {
  auto& st = self->state;
  const double capacity = static_cast<double>(st.parts.dram->capacity_bytes());
  const double used = static_cast<double>(st.parts.dram->used_bytes());
  if (st.evicting || !st.parts.master || used <= st.options.high_watermark * capacity)
    return;
  const double goal = (st.options.high_watermark - st.options.evict_fraction) * capacity;
  const auto bytes = static_cast<uint64_t>(used - goal);
  const int64_t now = clock_ns(self);
  auto victims = st.order->victims(bytes, victims_per_round_max, [&](block_key key) {
    auto i = st.blocks.find(key);
    return i == st.blocks.end() || i->second.evicting || !i->second.dram ||
           i->second.refused_until_ns > now;
  });
  if (victims.empty())
    return;
  std::vector<bool> to_ssd;
  uint64_t reserved = 0;
  for (auto key : victims) {
    auto& b = st.blocks.at(key);
    b.evicting = true;
    to_ssd.push_back(wants_ssd(self, b, reserved));
  }
  ask_master(self, std::move(victims), std::move(to_ssd));
}

} // namespace crescent
