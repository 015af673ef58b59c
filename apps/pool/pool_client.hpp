// A blocking client of a KV pool whose master and owners run in other processes: puts and gets
// of whole blocks through the store master's protocol and this process's transfer engine. Used
// by the multi-process pool tests and `crescent bench store`. Its batches are the prefill
// worker's (actors/store_master/pool_batches.hpp): the same reads in rounds and checked replica
// writes, driven here by waiting, there by the actor's messages.
#pragma once

#include "actors/common/reply_type.hpp"
#include "actors/store_master/pool_batches.hpp"
#include "actors/store_master/store_master_actor.hpp"
#include "apps/pool/get_combiner.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace crescent::pool {

/// What the store master counts (wire::StoreStats), as far as clients need it.
struct pool_stats {
  uint64_t complete_blocks = 0;
  uint64_t lost_blocks = 0; // left without any replica
  uint64_t corrupt_reports = 0;
  uint32_t live_nodes = 0;
  uint64_t ssd_write_errors = 0; // summed over live nodes, as of their last heartbeats
  uint64_t ssd_read_errors = 0;
};

/// Serves one thread at a time; give each thread its own client.
class pool_client {
 public:
  /// `node`: this client's own node id (no owner runs there). Clients given the same
  /// `combiner` (one per process and master) send their concurrent gets to the master together.
  /// Clients given the same `engine` (another client's engine()) copy through one transfer
  /// engine, as the workers of one serving process do: its routes and its mappings of the
  /// owners' memory are shared, so a peer joined by one client (await_owners) is known to all.
  /// Without one, the client makes its own.
  static caf::expected<std::unique_ptr<pool_client>>
  connect(caf::actor_system& sys, const std::string& host, uint16_t port, uint32_t node,
          std::shared_ptr<get_combiner> combiner = nullptr,
          std::shared_ptr<transport::transfer_engine> engine = nullptr);

  /// Waits until `count` owners have joined (at most `timeout`), and learns how to reach them.
  caf::error await_owners(size_t count, std::chrono::milliseconds timeout);

  /// Waits until the master counts exactly `count` live nodes (at most `timeout`): after a node
  /// died, this is when its replicas have left the metadata.
  caf::error await_live_nodes(uint32_t count, std::chrono::milliseconds timeout);

  /// The master's counters now.
  caf::expected<pool_stats> stats();

  /// Stores blocks (keys[i] holds blocks[i]) with `replicas` copies each; returns the keys that
  /// were acknowledged (committed and synced). Blocks that could not be placed or written are
  /// revoked and left out.
  caf::expected<std::vector<block_key>> put(std::span<const block_key> keys,
                                            std::span<const std::span<const std::byte>> blocks,
                                            uint32_t replicas);

  /// Removes blocks from the pool (1 to 4096 keys); their space is freed at their owners. Keys
  /// that are not there are skipped; a block under a read lease goes once the lease ends.
  caf::error remove(std::span<const block_key> keys);

  /// Reads blocks into `out` (each exactly its size); per key: true if read and verified. A
  /// replica that fails its checksum is reported and the next one tried. 1 to 4096 keys.
  caf::expected<std::vector<bool>> get(std::span<const block_key> keys,
                                       std::span<const std::span<std::byte>> out);

  /// The longest available prefix of a chain of blocks (a request's prompt blocks, in order):
  /// reads keys[0..n) into out[0..n) and returns n, stopping at the first block that is not in
  /// the pool or whose replicas all fail their checksum. 1 to 4096 keys.
  caf::expected<size_t> get_prefix(std::span<const block_key> keys,
                                   std::span<const std::span<std::byte>> out);

  transport::transfer_engine& engine() { return *engine_; }
  const std::shared_ptr<transport::transfer_engine>& shared_engine() const { return engine_; }
  const store_master_actor& master() const { return master_; }

 private:
  template <class... Xs>
  caf::expected<reply_t<store_master_actor, Xs...>> ask_master(const Xs&... xs);
  caf::error ask_master_void(const auto&... xs);
  /// Reads the blocks a get found into `out` (pool_batches::replica_reads: one batch a round,
  /// each block's next replica until one verifies). The blocks, verified or not.
  caf::expected<std::vector<pool_batches::block_read>>
  read_blocks(const std::vector<pool_protocol::block_location>& found,
              std::span<const block_key> keys, std::span<const std::span<std::byte>> out,
              pool_batches::read_extent extent);
  /// Submits one batch and waits for its end.
  caf::expected<std::vector<transport::op_result>>
  run_batch(const std::vector<transport::transfer_op>& ops);

  static constexpr auto batch_timeout = std::chrono::seconds(30);

  caf::actor_system* sys_ = nullptr;
  store_master_actor master_;
  std::shared_ptr<transport::transfer_engine> engine_;
  uint32_t node_ = 0;
  // Made once: a scoped actor is an actor, and spawning one per request cost more than the
  // request. It is why a client serves one thread at a time.
  std::unique_ptr<caf::scoped_actor> self_;
  std::shared_ptr<get_combiner> combiner_; // shared with other clients, or this one's own
};

} // namespace crescent::pool
