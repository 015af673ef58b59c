#include "storage/dram_arena.hpp"

#include "messages/errors.hpp"

#include <cassert>

namespace crescent::storage {

caf::expected<std::unique_ptr<dram_arena>>
dram_arena::create(std::shared_ptr<transport::transfer_engine> engine, uint32_t node,
                   uint64_t capacity_bytes, uint32_t blocks_max, uint64_t unit,
                   transport::touch when) {
  if (unit == 0 || (unit & (unit - 1)) != 0 || unit > unit_bytes)
    return make_error(errc::invalid_argument,
                      "a DRAM tier's unit must be a power of two up to 4 KiB");
  if (capacity_bytes < unit || blocks_max == 0)
    return make_error(errc::invalid_argument,
                      "a DRAM tier needs at least one unit and room for one block");
  auto memory = transport::host_memory::allocate(capacity_bytes, when);
  if (!memory)
    return std::move(memory.error());
  // Exactly the capacity asked for (the mapping is rounded up to whole pages): the pool's
  // capacity, and so when it evicts, is what the cluster file says.
  auto region = engine->register_region(node, memory->data(), capacity_bytes);
  if (!region)
    return std::move(region.error());
  return std::unique_ptr<dram_arena>{
      new dram_arena(std::move(engine), std::move(*memory), *region, blocks_max, unit)};
}

dram_arena::dram_arena(std::shared_ptr<transport::transfer_engine> engine,
                       transport::host_memory memory, transport::region_handle region,
                       uint32_t blocks_max, uint64_t unit)
    : engine_(std::move(engine)), memory_(std::move(memory)), region_(region),
      // Each block may split a free range in two: twice the blocks, plus the tail.
      space_(region.length, unit, blocks_max * 2 + 1) {}

dram_arena::~dram_arena() {
  // Nobody to report a failure to from a destructor; the region was registered by create().
  [[maybe_unused]] auto err = engine_->unregister_region(region_);
}

caf::expected<arena_block> dram_arena::allocate(uint64_t size_bytes) {
  auto r = space_.allocate(size_bytes);
  if (!r)
    return make_error(errc::no_space, "the DRAM tier has no room for " +
                                          std::to_string(size_bytes) + " more bytes");
  auto grant = engine_->grant(region_.slice(r->offset, size_bytes));
  if (!grant) {
    space_.free(*r);
    return std::move(grant.error());
  }
  return arena_block{*r, *grant};
}

void dram_arena::free(const arena_block& b) {
  // The grant was made by allocate() and is revoked only here: failing would be a bug.
  [[maybe_unused]] auto err = engine_->revoke(b.handle);
  assert(!err);
  space_.free(b.where);
}

std::span<std::byte> dram_arena::bytes(const arena_block& b, uint64_t size_bytes) {
  return memory_.bytes().subspan(b.where.offset, size_bytes);
}

} // namespace crescent::storage
