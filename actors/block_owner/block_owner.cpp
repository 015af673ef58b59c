#include "actors/block_owner/block_owner.hpp"

#include "actors/common/handler_guard.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "transport/region_handle.hpp"

#include <caf/stateful_actor.hpp>

#include <vector>

namespace crescent {

namespace {

struct block_owner_state {
  static inline const char* name = "block_owner";
  uint32_t node = 0;
  std::shared_ptr<storage::dram_pool> pool;
  bad_message_counter bad;
};

using self_ptr = block_owner_actor::stateful_pointer<block_owner_state>;

struct allocate_args {
  uint32_t count;
  uint64_t block_bytes;
};

caf::result<envelope> on_allocate(self_ptr self, const envelope& msg) {
  auto args = read_as<wire::Allocate>(msg, [](wire::Allocate::Reader in) {
    return allocate_args{in.getCount(), in.getBlockBytes()};
  });
  auto& st = self->state;
  if (!args)
    return st.bad.refuse(st.name, std::move(args.error()));
  if (args->count == 0 || args->count > allocate_count_max)
    return st.bad.refuse(st.name,
                         make_error(errc::limit_exceeded, "allocate count must be in [1, 4096]"));
  if (args->block_bytes != st.pool->slot_bytes())
    return st.bad.refuse(
        st.name, make_error(errc::invalid_argument,
                            "this pool holds blocks of " + std::to_string(st.pool->slot_bytes()) +
                                " bytes, not " + std::to_string(args->block_bytes)));
  auto slots = st.pool->allocate(args->count);
  return make_envelope<wire::AllocateReply>([&](wire::AllocateReply::Builder out) {
    auto list = out.initHandles(static_cast<unsigned>(slots.size()));
    for (unsigned i = 0; i < slots.size(); ++i)
      transport::to_wire(slots[i], list[i]);
  });
}

caf::result<void> on_free(self_ptr self, const envelope& msg) {
  auto handles = read_as<wire::FreeBlocks>(msg, [](wire::FreeBlocks::Reader in) {
    std::vector<transport::region_handle> out;
    for (auto h : in.getHandles())
      out.push_back(transport::from_wire(h));
    return out;
  });
  auto& st = self->state;
  if (!handles)
    return st.bad.refuse(st.name, std::move(handles.error()));
  if (handles->size() > allocate_count_max)
    return st.bad.refuse(st.name, make_error(errc::limit_exceeded, "free of over 4096 slots"));
  // Free what is valid and report the first invalid slot: a bad entry must not leak the rest.
  caf::error first_error;
  for (const auto& h : *handles)
    if (auto err = st.pool->free(h); err && !first_error)
      first_error = std::move(err);
  if (first_error)
    return st.bad.refuse(st.name, std::move(first_error));
  return caf::unit;
}

envelope make_stats(self_ptr self) {
  auto& st = self->state;
  return make_envelope<wire::OwnerStats>([&](wire::OwnerStats::Builder out) {
    out.setNode(st.node);
    out.setCapacityBlocks(st.pool->capacity_slots());
    out.setUsedBlocks(st.pool->used_slots());
    out.setBadMessages(st.bad.count);
  });
}

block_owner_actor::behavior_type block_owner(self_ptr self, uint32_t node,
                                             std::shared_ptr<storage::dram_pool> pool) {
  self->state.node = node;
  self->state.pool = std::move(pool);
  return {
      [=](allocate_atom, const envelope& msg) { return on_allocate(self, msg); },
      [=](free_atom, const envelope& msg) { return on_free(self, msg); },
      [=](stats_atom) { return make_stats(self); },
  };
}

} // namespace

block_owner_actor spawn_block_owner(caf::actor_system& sys, uint32_t node,
                                    std::shared_ptr<storage::dram_pool> pool) {
  return sys.spawn(block_owner, node, std::move(pool));
}

} // namespace crescent
