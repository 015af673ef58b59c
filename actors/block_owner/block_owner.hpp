// The block owner of one node: it hands out slots of the node's DRAM pool to the store master
// and takes them back. The bytes themselves move through the transfer engine.
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "storage/dram_pool.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace crescent {

/// Slots one Allocate may ask for.
inline constexpr uint32_t allocate_count_max = 4096;

block_owner_actor spawn_block_owner(caf::actor_system& sys, uint32_t node,
                                    std::shared_ptr<storage::dram_pool> pool);

} // namespace crescent
