// A block owner's DRAM pool: one registered region cut into fixed-size slots.
//
// Slots are handed out as region handles that any holder can write or read through the transfer
// engine; the pool itself only tracks which slots are in use. No per-block allocation happens
// after creation. Not thread-safe: owned by one block_owner actor.
#pragma once

#include "transport/host_memory.hpp"
#include "transport/region_handle.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace crescent::storage {

class dram_pool {
 public:
  static constexpr uint32_t slots_max = 1u << 24;
  static constexpr uint64_t slot_bytes_max = 64ull << 20;

  /// Maps and registers `slots` slots of `slot_bytes` bytes on `node`.
  static caf::expected<std::unique_ptr<dram_pool>>
  create(std::shared_ptr<transport::transfer_engine> engine, uint32_t node, uint64_t slot_bytes,
         uint32_t slots, transport::touch when = transport::touch::up_front);

  dram_pool(const dram_pool&) = delete;
  dram_pool& operator=(const dram_pool&) = delete;
  /// Unregisters the region: handles still held elsewhere then fail with not_found.
  ~dram_pool();

  /// Up to `count` free slots (fewer when the pool runs out), marked used.
  std::vector<transport::region_handle> allocate(uint32_t count);

  /// Returns a slot. Errors: not a slot handle of this pool, or not allocated.
  caf::error free(const transport::region_handle& slot);

  uint64_t slot_bytes() const { return slot_bytes_; }
  uint32_t capacity_slots() const { return static_cast<uint32_t>(used_.size()); }
  uint32_t used_slots() const { return capacity_slots() - static_cast<uint32_t>(free_.size()); }

  /// The bytes behind a slot handle of this pool (for tests and fault injection).
  caf::expected<std::span<std::byte>> slot_memory(const transport::region_handle& slot);

  /// The pool's whole memory (every slot).
  std::span<std::byte> memory() const { return memory_->bytes(); }

  /// Keeps the pool's memory mapped while held, even past the pool's end (without its region
  /// registration): for transfers that may still read slots after their owner is gone. It
  /// holds no reference to the engine, so the engine may end meanwhile.
  std::shared_ptr<const void> memory_keepalive() const { return memory_; }

 private:
  dram_pool(std::shared_ptr<transport::transfer_engine> engine, transport::host_memory memory,
            transport::region_handle region, uint64_t slot_bytes, uint32_t slots);

  caf::expected<uint32_t> slot_index(const transport::region_handle& slot) const;

  std::shared_ptr<transport::transfer_engine> engine_;
  std::shared_ptr<transport::host_memory> memory_; // never null
  transport::region_handle region_;
  uint64_t slot_bytes_;
  std::vector<uint32_t> free_; // a stack: the most recently freed slot is reused first
  std::vector<bool> used_;
};

} // namespace crescent::storage
