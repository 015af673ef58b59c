// State and handlers of the store master, split by concern across files of this folder.
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/common/handler_guard.hpp"
#include "actors/store_master/store_master_actor.hpp"
#include "storage/metadata_store.hpp"
#include "transport/region_handle.hpp"

#include <memory>
#include <vector>

namespace crescent {

struct store_master_state {
  static inline const char* name = "store_master";
  std::shared_ptr<storage::metadata_store> metadata;
  std::shared_ptr<const directory> dir;
  bad_message_counter bad;
  uint64_t corrupt_reports = 0;
};

using store_master_ptr = store_master_actor::stateful_pointer<store_master_state>;

caf::result<envelope> on_put_start(store_master_ptr self, const envelope& msg);
caf::result<void> on_put_commit(store_master_ptr self, const envelope& msg);
caf::result<void> on_put_revoke(store_master_ptr self, const envelope& msg);
caf::result<envelope> on_get_prefix(store_master_ptr self, const envelope& msg);
caf::result<void> on_corrupt(store_master_ptr self, const envelope& msg);

/// Gives slots back to their block owners (fire and forget: a lost free leaks one slot until
/// the owner restarts, it never hands out a slot twice).
void release_slots(store_master_ptr self, const std::vector<transport::region_handle>& slots);

} // namespace crescent
