// The block owner of one node: its DRAM tier (a registered arena) and SSD tier of KV blocks.
//
// It allocates and frees space when the store master asks, copies SSD blocks back into DRAM on
// request (promotion), and keeps DRAM use under the high watermark: past it, it picks victims by
// its eviction policy until `evict_fraction` of the capacity would be free, copies them to SSD
// when the SSD tier has room (offload), and asks the store master for each whether it may drop
// the DRAM copy. The master refuses leased, pinned and pending blocks; only approved copies are
// freed. Reads are one-sided and never reach it, so the master tells it which blocks were used
// (Touch, after gets and repeated puts), and the eviction order follows that. Every heartbeat
// interval it tells the master it is alive and how full it is.
//
// In simulated time its tiers hold the modeled engine's stand-ins, and the SSD's time comes from
// the modeled drive (ssd_modeled_ns): a promotion is answered when its reads would have ended.
// An offload's DRAM copy is freed when its write is queued, not when it ends (as if written from
// a copy): the modeled write holds only the drive.
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/store_master/store_master_actor.hpp"
#include "storage/dram_arena.hpp"
#include "storage/eviction.hpp"
#include "storage/ssd_tier.hpp"
#include "transport/transfer_types.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

namespace crescent {

struct block_owner_options {
  uint32_t node = 0;
  storage::eviction_policy policy = storage::eviction_policy::lru;
  double high_watermark = 0.90;
  double evict_fraction = 0.05;
  // DRAM that new puts may not take, kept for promotions from SSD: reads of SSD-only blocks
  // find room even while puts and leased blocks fill the rest. It applies only where the high
  // watermark lies below it (else puts could never start an eviction).
  double promotion_reserve = 0.05;
  std::chrono::milliseconds heartbeat_interval{1000};
  /// A thread of its own, for its SSD I/O (actors/common/spawn_placement.hpp): real time only.
  bool own_thread = false;
};

struct block_owner_parts {
  std::shared_ptr<storage::dram_arena> dram;
  std::shared_ptr<storage::ssd_tier> ssd; // null: no SSD tier
  store_master_actor master;
  /// How other processes reach this node's memory; none in one-process clusters.
  std::optional<transport::peer_info> peer;
  /// Simulated time: how long after now an SSD read (or write) of `bytes` ends on the modeled
  /// drive (transport/modeled_links.hpp). Promotions answer that much later; offloads keep the
  /// drive busy. Empty in real time, where the I/O itself takes the time.
  std::function<uint64_t(uint64_t bytes, bool write)> ssd_modeled_ns;
};

/// Promotions waiting for their modeled SSD reads to end, at most (more are refused).
inline constexpr size_t promotions_waiting_max = 4096;

/// Blocks one message may name, at most.
inline constexpr uint32_t owner_batch_max = 4096;

block_owner_actor spawn_block_owner(caf::actor_system& sys, block_owner_options options,
                                    block_owner_parts parts);

} // namespace crescent
