#include "storage/dram_pool.hpp"

#include "messages/errors.hpp"

namespace crescent::storage {

caf::expected<std::unique_ptr<dram_pool>>
dram_pool::create(std::shared_ptr<transport::transfer_engine> engine, uint32_t node,
                  uint64_t slot_bytes, uint32_t slots, transport::touch when) {
  if (slot_bytes == 0 || slot_bytes > slot_bytes_max)
    return make_error(errc::invalid_argument,
                      "pool slot size " + std::to_string(slot_bytes) + " is not in [1, 64 MiB]");
  if (slots == 0 || slots > slots_max)
    return make_error(errc::invalid_argument,
                      "pool slot count " + std::to_string(slots) + " is not in [1, 2^24]");
  auto memory = transport::host_memory::allocate(slot_bytes * slots, when);
  if (!memory)
    return std::move(memory.error());
  auto region = engine->register_region(node, memory->data(), memory->size_bytes());
  if (!region)
    return std::move(region.error());
  return std::unique_ptr<dram_pool>{
      new dram_pool(std::move(engine), std::move(*memory), *region, slot_bytes, slots)};
}

dram_pool::dram_pool(std::shared_ptr<transport::transfer_engine> engine,
                     transport::host_memory memory, transport::region_handle region,
                     uint64_t slot_bytes, uint32_t slots)
    : engine_(std::move(engine)),
      memory_(std::make_shared<transport::host_memory>(std::move(memory))), region_(region),
      slot_bytes_(slot_bytes), used_(slots, false) {
  free_.reserve(slots);
  for (uint32_t i = slots; i > 0; --i)
    free_.push_back(i - 1);
}

dram_pool::~dram_pool() {
  // The region was registered by create; failing to unregister it is a broken invariant, and
  // there is nobody to report it to from a destructor.
  [[maybe_unused]] auto err = engine_->unregister_region(region_);
}

std::vector<transport::region_handle> dram_pool::allocate(uint32_t count) {
  std::vector<transport::region_handle> out;
  while (out.size() < count && !free_.empty()) {
    uint32_t index = free_.back();
    free_.pop_back();
    used_[index] = true;
    out.push_back(region_.slice(uint64_t{index} * slot_bytes_, slot_bytes_));
  }
  return out;
}

caf::expected<uint32_t> dram_pool::slot_index(const transport::region_handle& slot) const {
  if (slot.region_id != region_.region_id || slot.access_key != region_.access_key ||
      slot.node != region_.node)
    return make_error(errc::not_found, to_string(slot) + " is not in this pool");
  if (slot.length != slot_bytes_ || slot.offset % slot_bytes_ != 0 ||
      slot.offset / slot_bytes_ >= used_.size())
    return make_error(errc::invalid_argument, to_string(slot) + " is not a slot of this pool");
  return static_cast<uint32_t>(slot.offset / slot_bytes_);
}

caf::error dram_pool::free(const transport::region_handle& slot) {
  auto index = slot_index(slot);
  if (!index)
    return std::move(index.error());
  if (!used_[*index])
    return make_error(errc::invalid_argument, to_string(slot) + " is already free");
  used_[*index] = false;
  free_.push_back(*index);
  return caf::none;
}

caf::expected<std::span<std::byte>> dram_pool::slot_memory(const transport::region_handle& slot) {
  auto index = slot_index(slot);
  if (!index)
    return std::move(index.error());
  return memory_->bytes().subspan(uint64_t{*index} * slot_bytes_, slot_bytes_);
}

} // namespace crescent::storage
