#include "actors/store_master/store_master.hpp"

#include "actors/common/timeouts.hpp"
#include "actors/store_master/store_master_state.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <map>

namespace crescent {

void release_slots(store_master_ptr self, const std::vector<transport::region_handle>& slots) {
  std::map<uint32_t, std::vector<transport::region_handle>> by_node;
  for (const auto& s : slots)
    by_node[s.node].push_back(s);
  for (auto& [node, list] : by_node) {
    if (node >= self->state.dir->block_owners.size()) {
      spdlog::error("store_master: slot on unknown node {}", node);
      continue;
    }
    auto msg = make_envelope<wire::FreeBlocks>([&](wire::FreeBlocks::Builder out) {
      auto handles = out.initHandles(static_cast<unsigned>(list.size()));
      for (unsigned i = 0; i < list.size(); ++i)
        transport::to_wire(list[i], handles[i]);
    });
    self->request(self->state.dir->block_owners[node], control_timeout, free_atom::value, msg)
        .then([] {},
              [node](caf::error& err) {
                spdlog::warn("store_master: freeing slots on node {} failed: {}", node,
                             describe(err));
              });
  }
}

namespace {

envelope make_stats(store_master_ptr self) {
  auto& st = self->state;
  return make_envelope<wire::StoreStats>([&](wire::StoreStats::Builder out) {
    out.setCompleteBlocks(st.metadata->complete_count());
    out.setPendingBlocks(st.metadata->pending_count());
    out.setBadMessages(st.bad.count);
    out.setCorruptReports(st.corrupt_reports);
  });
}

store_master_actor::behavior_type store_master(store_master_ptr self,
                                               std::shared_ptr<storage::metadata_store> metadata,
                                               std::shared_ptr<const directory> dir) {
  self->state.metadata = std::move(metadata);
  self->state.dir = std::move(dir);
  return {
      [=](put_start_atom, const envelope& msg) { return on_put_start(self, msg); },
      [=](put_commit_atom, const envelope& msg) { return on_put_commit(self, msg); },
      [=](put_revoke_atom, const envelope& msg) { return on_put_revoke(self, msg); },
      [=](get_prefix_atom, const envelope& msg) { return on_get_prefix(self, msg); },
      [=](corrupt_atom, const envelope& msg) { return on_corrupt(self, msg); },
      [=](stats_atom) { return make_stats(self); },
  };
}

} // namespace

store_master_actor spawn_store_master(caf::actor_system& sys,
                                      std::shared_ptr<storage::metadata_store> metadata,
                                      std::shared_ptr<const directory> dir) {
  return sys.spawn(store_master, std::move(metadata), std::move(dir));
}

} // namespace crescent
