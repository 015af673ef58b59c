#include "actors/block_owner/block_owner.hpp"

#include "actors/block_owner/owner_state.hpp"
#include "actors/common/spawn_placement.hpp"
#include "actors/common/timeouts.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "messages/wire_version.hpp"
#include "transport/peer_wire.hpp"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <cassert>
#include <utility>

namespace crescent {

namespace {

typed_envelope<wire::OwnerStats> make_stats(owner_ptr self) {
  auto& st = self->state;
  return make_envelope<wire::OwnerStats>([&](wire::OwnerStats::Builder out) {
    out.setNode(st.options.node);
    out.setDramCapacityBytes(st.parts.dram->capacity_bytes());
    out.setDramUsedBytes(st.parts.dram->used_bytes());
    out.setSsdCapacityBytes(st.parts.ssd ? st.parts.ssd->capacity_bytes() : 0);
    out.setSsdUsedBytes(st.parts.ssd ? st.parts.ssd->used_bytes() : 0);
    out.setBlocks(st.blocks.size());
    out.setEvictions(st.evictions);
    out.setEvictionRefusals(st.eviction_refusals);
    out.setOffloads(st.offloads);
    out.setPromotions(st.promotions);
    out.setBadMessages(st.bad.count);
    out.setSsdWriteErrors(st.ssd_write_errors);
    out.setSsdReadErrors(st.ssd_read_errors);
    out.setLastSsdError(st.last_ssd_error);
  });
}

typed_envelope<wire::OwnerReport> make_report(owner_ptr self) {
  auto& st = self->state;
  return make_envelope<wire::OwnerReport>([&](wire::OwnerReport::Builder out) {
    out.setNode(st.options.node);
    out.setWireVersion(wire_version);
    auto list = out.initBlocks(static_cast<unsigned>(st.blocks.size()));
    unsigned i = 0;
    for (const auto& [key, b] : st.blocks) {
      write_key(list[i].initKey(), key);
      list[i].setSizeBytes(b.size_bytes);
      list[i].setInDram(b.dram.has_value());
      if (b.dram)
        transport::to_wire(b.dram->handle, list[i].initDram());
      list[i].setOnSsd(b.on_ssd);
      ++i;
    }
    out.setDramCapacityBytes(st.parts.dram->capacity_bytes());
    out.setDramUsedBytes(st.parts.dram->used_bytes());
    out.setHasPeer(st.parts.peer.has_value());
    if (st.parts.peer)
      transport::to_wire(*st.parts.peer, out.initPeer());
  });
}

void report(owner_ptr self);

void heartbeat(owner_ptr self) {
  auto& st = self->state;
  self->delayed_send(self, st.options.heartbeat_interval, tick_atom::value);
  if (!st.parts.master)
    return; // not joined yet
  auto msg = make_envelope<wire::OwnerHeartbeat>([&](wire::OwnerHeartbeat::Builder out) {
    out.setNode(st.options.node);
    out.setDramCapacityBytes(st.parts.dram->capacity_bytes());
    out.setDramUsedBytes(st.parts.dram->used_bytes());
    out.setSsdCapacityBytes(st.parts.ssd ? st.parts.ssd->capacity_bytes() : 0);
    out.setSsdUsedBytes(st.parts.ssd ? st.parts.ssd->used_bytes() : 0);
    out.setSsdWriteErrors(st.ssd_write_errors);
    out.setSsdReadErrors(st.ssd_read_errors);
  });
  // A master that dropped this node (it went silent, or left the conductor's view) refuses its
  // heartbeats as unavailable until it reports again: the report is the check it rejoins by.
  self->request(st.parts.master, control_timeout, owner_atom::value, heartbeat_atom::value, msg)
      .then([=] { self->state.rejoining = false; },
            [=](caf::error& err) {
              if (is(err, errc::unavailable))
                report(self);
            });
}

// Tells the master what survived a restart (the SSD tier), and frees what it does not know.
void report(owner_ptr self) {
  auto& st = self->state;
  if (!st.parts.master)
    return; // not joined yet: joining reports
  self->request(st.parts.master, control_timeout, owner_atom::value, report_atom::value,
                make_report(self))
      .then(
          [=](const typed_envelope<wire::OwnerReportReply>& reply) {
            self->state.rejoining = false;
            auto drop = read_as<wire::OwnerReportReply>(
                reply, [](wire::OwnerReportReply::Reader in) { return to_keys(in.getDrop()); });
            if (!drop)
              return;
            auto& s = self->state;
            for (auto key : *drop) {
              auto i = s.blocks.find(key);
              if (i == s.blocks.end() || i->second.evicting)
                continue;
              release_dram(self, key, i->second);
              if (i->second.on_ssd && s.parts.ssd) [[maybe_unused]]
                auto err = s.parts.ssd->remove(key);
              s.blocks.erase(i);
            }
          },
          [=](caf::error& err) {
            // Refused while its node is out of the conductor's view: said once, then tried
            // again at every heartbeat.
            if (!std::exchange(self->state.rejoining, true) || !is(err, errc::unavailable))
              spdlog::warn("block_owner {}: report not taken: {}", self->state.options.node,
                           describe(err));
          });
}

block_owner_actor::behavior_type block_owner(owner_ptr self, block_owner_options options,
                                             block_owner_parts parts) {
  auto& st = self->state;
  st.options = options;
  st.parts = std::move(parts);
  st.order = std::make_unique<storage::eviction_index>(options.policy);
  keep_serving_on_errors(self);
  if (st.parts.ssd) // blocks that survived on SSD: known, not in DRAM
    for (const auto& b : st.parts.ssd->blocks())
      st.blocks[b.key] = owned_block{b.size_bytes, std::nullopt, true};
  return {
      [=](allocate_atom, const typed_envelope<wire::Allocate>& msg) {
        return on_allocate(self, msg);
      },
      [=](free_atom, const typed_envelope<wire::FreeBlocks>& msg) { return on_free(self, msg); },
      [=](promote_atom, const typed_envelope<wire::Promote>& msg) { return on_promote(self, msg); },
      [=](promote_atom, uint64_t id) { on_promoted(self, id); },
      [=](touch_atom, const typed_envelope<wire::Touch>& msg) { on_touch(self, msg); },
      [=](verify_atom, const typed_envelope<wire::VerifyBlock>& msg) {
        return on_verify(self, msg);
      },
      [=](report_atom) { return make_report(self); },
      [=](stats_atom) { return make_stats(self); },
      [=](start_atom) {
        report(self);
        if (!std::exchange(self->state.beating, true))
          heartbeat(self);
      },
      [=](tick_atom) {
        if (!refuse_unless_self_sent(self, "tick"))
          heartbeat(self);
      },
      [=](join_atom, store_master_actor master) {
        // A restarted master: it learns this owner and what it holds from the report.
        self->state.parts.master = std::move(master);
        report(self);
        if (!std::exchange(self->state.beating, true))
          heartbeat(self);
      },
  };
}

} // namespace

block_owner_actor spawn_block_owner(caf::actor_system& sys, block_owner_options options,
                                    block_owner_parts parts) {
  // Programmer errors: configurations are checked where they are read (cluster_config).
  assert(options.high_watermark > 0 && options.high_watermark <= 1);
  assert(options.promotion_reserve >= 0 && options.promotion_reserve < 0.5);
  return spawn_placed(sys, options.own_thread, block_owner, options, std::move(parts));
}

} // namespace crescent
