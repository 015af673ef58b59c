// A block owner's DRAM tier: one registered region of shared memory, carved into blocks of any
// size by a range_allocator. A block is handed out as a grant (transfer_engine::grant) that
// covers exactly it: anyone holding the handle reads or writes that block through the transfer
// engine, and no other; freeing the block revokes the grant, so a handle kept past the block's
// end fails (not_found) instead of reaching whatever is stored there next. The region's own
// handle never leaves the arena.
//
// Not thread-safe: owned by one block owner actor.
#pragma once

#include "storage/range_allocator.hpp"
#include "transport/host_memory.hpp"
#include "transport/region_handle.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

namespace crescent::storage {

struct arena_block {
  range where;
  transport::region_handle handle;
};

class dram_arena {
 public:
  static constexpr uint64_t unit_bytes = 4096;

  /// An arena of `capacity_bytes` for at most `blocks_max` blocks, handed out in multiples of
  /// `unit` bytes (a power of two; smaller units suit small blocks, such as stand-ins).
  static caf::expected<std::unique_ptr<dram_arena>>
  create(std::shared_ptr<transport::transfer_engine> engine, uint32_t node, uint64_t capacity_bytes,
         uint32_t blocks_max, uint64_t unit = unit_bytes,
         transport::touch when = transport::touch::up_front);

  /// Unregisters the region: handles still held elsewhere then fail with not_found.
  ~dram_arena();
  dram_arena(const dram_arena&) = delete;
  dram_arena& operator=(const dram_arena&) = delete;

  /// Space for a block of `size_bytes` and its grant. no_space when the arena is full;
  /// limit_exceeded when the engine's region table has no slot left for the grant.
  caf::expected<arena_block> allocate(uint64_t size_bytes);
  /// Revokes the block's grant and frees its space.
  void free(const arena_block& b);

  /// The bytes of a block (its first `size_bytes`).
  std::span<std::byte> bytes(const arena_block& b, uint64_t size_bytes);

  uint64_t capacity_bytes() const { return space_.capacity_bytes(); }
  uint64_t used_bytes() const { return space_.used_bytes(); }

 private:
  dram_arena(std::shared_ptr<transport::transfer_engine> engine, transport::host_memory memory,
             transport::region_handle region, uint32_t blocks_max, uint64_t unit);

  std::shared_ptr<transport::transfer_engine> engine_;
  transport::host_memory memory_;
  transport::region_handle region_;
  range_allocator space_;
};

} // namespace crescent::storage
