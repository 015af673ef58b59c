#include "actors/store_master/store_master.hpp"

#include "actors/common/spawn_placement.hpp"
#include "actors/store_master/master_state.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace crescent {

int64_t now_ns(master_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

namespace {

typed_envelope<wire::StoreStats> make_stats(master_ptr self) {
  auto& st = self->state;
  uint32_t live = 0;
  uint64_t write_errors = 0;
  uint64_t read_errors = 0;
  for (const auto& n : st.nodes) {
    live += n.alive ? 1 : 0;
    write_errors += n.alive ? n.ssd_write_errors : 0;
    read_errors += n.alive ? n.ssd_read_errors : 0;
  }
  return make_envelope<wire::StoreStats>([&](wire::StoreStats::Builder out) {
    out.setCompleteBlocks(st.objects->complete_count());
    out.setPendingBlocks(st.objects->pending_count());
    out.setBadMessages(st.bad.count);
    out.setCorruptReports(st.corrupt_reports);
    out.setReclaimedPuts(st.reclaimed);
    out.setLostBlocks(st.lost);
    out.setLiveNodes(live);
    out.setEvictionsApproved(st.approved);
    out.setEvictionsRefused(st.refused);
    out.setSsdWriteErrors(write_errors);
    out.setSsdReadErrors(read_errors);
    out.setCommitWrites(st.objects->commit_writes());
    out.setReplicasAdded(st.replicas_added);
    out.setDroppedOnLoad(st.objects->loaded().dropped_blocks +
                         st.objects->loaded().dropped_replicas);
    out.setLeasedBlocks(st.objects->leased_count(now_ns(self)));
    out.setLostReplicatedBlocks(st.lost_replicated);
    out.setIntactOnVerify(st.intact_on_verify);
    out.setUnverifiedReports(st.unverified_reports);
    out.setNodesLost(
        static_cast<uint32_t>(std::count(st.ever_lost.begin(), st.ever_lost.end(), true)));
  });
}

// The directory is complete once `start` arrives: its owners (in a one-process cluster) are the
// nodes' owners; in clusters of several processes owners join by reporting.
void start(master_ptr self) {
  auto& st = self->state;
  if (st.started)
    return;
  st.started = true;
  if (st.dir)
    for (uint32_t n = 0; n < st.dir->block_owners.size() && n < st.nodes.size(); ++n)
      adopt_owner(self, n, st.dir->block_owners[n]);
  self->delayed_send(self, st.options.sweep, tick_atom::value);
}

store_master_actor::behavior_type store_master(master_ptr self, store_master_options options,
                                               std::shared_ptr<storage::object_store> objects,
                                               directory_ref dir) {
  auto& st = self->state;
  st.options = options;
  st.objects = std::move(objects);
  st.dir = std::move(dir);
  st.rng.seed(options.placement_seed);
  st.nodes.assign(options.nodes, node_view{});
  if (const auto& l = st.objects->loaded(); l.dropped_blocks + l.dropped_replicas > 0)
    spdlog::warn("store_master: of the block metadata read back, {} blocks and {} replicas were "
                 "dropped (first: {}); {} blocks are served",
                 l.dropped_blocks, l.dropped_replicas, l.first_reason, l.blocks);
  keep_serving_on_errors(self);
  self->set_down_handler([=](caf::down_msg& down) {
    auto& nodes = self->state.nodes;
    for (uint32_t n = 0; n < nodes.size(); ++n)
      if (nodes[n].owner && nodes[n].owner.address() == down.source)
        node_lost(self, n, "its block owner stopped");
  });
  return {
      [=](put_start_atom, const typed_envelope<wire::PutStart>& msg) {
        return on_put_start(self, msg);
      },
      [=](put_commit_atom, const typed_envelope<wire::PutCommit>& msg) {
        return on_put_commit(self, msg);
      },
      [=](put_commit_atom) { flush_commits(self); },
      [=](put_revoke_atom, const typed_envelope<wire::PutRevoke>& msg) {
        return on_put_revoke(self, msg);
      },
      [=](get_atom, const typed_envelope<wire::Get>& msg) { return on_get(self, msg); },
      [=](exists_atom, const typed_envelope<wire::Exists>& msg) { return on_exists(self, msg); },
      [=](remove_atom, const typed_envelope<wire::Remove>& msg) { return on_remove(self, msg); },
      [=](pin_atom, const typed_envelope<wire::Pin>& msg) { return on_pin(self, msg); },
      [=](unpin_atom, const typed_envelope<wire::Unpin>& msg) { return on_unpin(self, msg); },
      [=](corrupt_atom, const typed_envelope<wire::ReportCorrupt>& msg) {
        return on_corrupt(self, msg);
      },
      [=](owner_atom, heartbeat_atom, const typed_envelope<wire::OwnerHeartbeat>& msg) {
        return on_owner_heartbeat(self, msg);
      },
      [=](owner_atom, report_atom, const typed_envelope<wire::OwnerReport>& msg) {
        return on_owner_report(self, msg);
      },
      [=](membership_atom, const typed_envelope<wire::NodeStatus>& msg) {
        on_node_status(self, msg);
      },
      [=](evict_atom, const typed_envelope<wire::EvictRequest>& msg) {
        return on_evict(self, msg);
      },
      [=](stats_atom) { return make_stats(self); },
      [=](peers_atom) { return on_peers(self); },
      [=](start_atom) { start(self); },
      [=](tick_atom) {
        if (refuse_unless_self_sent(self, "tick"))
          return;
        sweep(self);
        self->delayed_send(self, self->state.options.sweep, tick_atom::value);
      },
  };
}

} // namespace

store_master_actor spawn_store_master(caf::actor_system& sys, store_master_options options,
                                      std::shared_ptr<storage::object_store> objects,
                                      directory_ref dir) {
  return spawn_placed(sys, options.own_thread, store_master, options, std::move(objects),
                      std::move(dir));
}

} // namespace crescent
