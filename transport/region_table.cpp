#include "transport/region_table.hpp"

#include "messages/errors.hpp"
#include "transport/region_table_layout.hpp"
#include "transport/sealed_file.hpp"
#include "transport/shared_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace crescent::transport {

using detail::table_header;
using detail::table_slot;

namespace {

uint64_t pack_location(const device_export& d) {
  return (uint64_t{static_cast<uint8_t>(d.location.kind)} << 56) | (uint64_t{d.exportable} << 48) |
         static_cast<uint32_t>(d.location.device);
}

device_export unpack_location(uint64_t word) {
  device_export d;
  d.location.kind = (word >> 56) == 1 ? memory_kind::cuda : memory_kind::cpu;
  d.exportable = ((word >> 48) & 0xff) != 0;
  d.location.device = static_cast<int32_t>(word & 0xffffffffu);
  return d;
}

caf::error refuse_gpu(const region_handle& h, const memory_location& where) {
  return make_error(errc::unavailable,
                    to_string(h) + " is GPU memory (" + to_string(where) +
                        "): GPU regions are reachable only from the same host, by the cuda path");
}

} // namespace

caf::error check_access(const region_entry& e, const region_handle& h, uint64_t offset,
                        uint64_t length) {
  if (e.region_id == 0 || e.region_id != h.region_id)
    return make_error(errc::not_found, "no registered region for " + to_string(h));
  if (e.access_key != h.access_key)
    return make_error(errc::access_denied, "access key does not match " + to_string(h));
  if (h.offset > e.length || h.length > e.length - h.offset)
    return make_error(errc::out_of_range, to_string(h) + " lies outside its region of " +
                                              std::to_string(e.length) + " bytes");
  if (offset > h.length || length > h.length - offset)
    return make_error(errc::out_of_range, "bytes [" + std::to_string(offset) + ", +" +
                                              std::to_string(length) + ") lie outside " +
                                              to_string(h));
  return caf::none;
}

caf::expected<std::unique_ptr<region_table>> region_table::create(uint32_t capacity) {
  if (capacity == 0 || capacity > capacity_max)
    return make_error(errc::invalid_argument, "region table capacity must be in [1, 2^20]");
  std::unique_ptr<region_table> t{new region_table};
  t->capacity_ = capacity;
  t->bytes_ = sizeof(table_header) + uint64_t{capacity} * sizeof(table_slot);
  auto fd = sealed_memfd("crescent-region-table", t->bytes_);
  if (!fd)
    return make_error(errc::no_space, "region table: " + describe(fd.error()));
  t->fd_ = *fd;
  t->map_ = mmap(nullptr, t->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd_, 0);
  if (t->map_ == MAP_FAILED) {
    t->map_ = nullptr;
    return make_error(errc::no_space, std::string{"region table: "} + std::strerror(errno));
  }
  // The file starts zeroed: every slot free, every generation 0.
  auto* header = static_cast<table_header*>(t->map_);
  header->version_capacity.store((uint64_t{detail::table_version} << 32) | capacity);
  header->magic.store(detail::table_magic, std::memory_order_release);
  // Slots are made as regions need them: the table's capacity is 2^18 by default, and slots
  // that exist for nothing would cost every engine a 50 MB first touch.
  return t;
}

region_table::~region_table() {
  if (map_ != nullptr)
    munmap(map_, bytes_);
  if (fd_ >= 0)
    close(fd_);
}

table_slot* region_table::slot(uint32_t i) const {
  return reinterpret_cast<table_slot*>(static_cast<char*>(map_) + sizeof(table_header)) + i;
}

void region_table::publish(uint32_t i, const region_entry& e) {
  auto* s = slot(i);
  const uint64_t seq = s->seq.load(std::memory_order_relaxed);
  s->seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->region_id.store(e.region_id, std::memory_order_relaxed);
  s->access_key.store(e.access_key, std::memory_order_relaxed);
  s->length.store(e.length, std::memory_order_relaxed);
  s->segment_id.store(e.segment_id, std::memory_order_relaxed);
  s->segment_offset.store(e.segment_offset, std::memory_order_relaxed);
  s->fd_node.store((uint64_t{static_cast<uint32_t>(e.segment_fd)} << 32) | e.node,
                   std::memory_order_relaxed);
  s->segment_inode.store(e.segment_inode, std::memory_order_relaxed);
  s->location.store(pack_location(e.device), std::memory_order_relaxed);
  s->pci.store(e.device.pci, std::memory_order_relaxed);
  s->alloc_offset.store(e.device.alloc_offset, std::memory_order_relaxed);
  s->address.store(e.address, std::memory_order_relaxed);
  for (size_t w = 0; w < detail::ipc_words; ++w) {
    uint64_t word = 0;
    std::memcpy(&word, e.device.ipc_handle.data() + w * sizeof(word), sizeof(word));
    s->ipc_handle[w].store(word, std::memory_order_relaxed);
  }
  s->seq.store(seq + 2, std::memory_order_release);
}

caf::expected<uint32_t> region_table::take_slot() {
  if (free_.empty() && local_.size() >= capacity_)
    return make_error(errc::limit_exceeded,
                      "all " + std::to_string(capacity_) +
                          " region table slots (regions and grants) are in use");
  if (free_.empty()) {
    free_.push_back(static_cast<uint32_t>(local_.size()));
    local_.emplace_back(); // a deque: references to the other slots stay valid
  }
  const uint32_t i = free_.back();
  free_.pop_back();
  return i;
}

region_table::local_slot* region_table::live_slot(const region_handle& h) {
  const auto i = static_cast<uint32_t>(h.region_id & (capacity_max - 1));
  if (i >= local_.size() || !local_[i].live || local_[i].entry.region_id != h.region_id)
    return nullptr;
  return &local_[i];
}

caf::expected<region_handle> region_table::insert(uint32_t node, std::byte* base, uint64_t length,
                                                  uint64_t access_key,
                                                  const device_export& device) {
  std::lock_guard guard{mutex_};
  auto taken = take_slot();
  if (!taken)
    return std::move(taken.error());
  const uint32_t i = *taken;
  auto& l = local_[i];
  const uint64_t generation = (l.entry.region_id >> slot_bits) + 1;
  l.base = base;
  l.live = true;
  l.pins = 0;
  l.parent = no_parent;
  l.grants = 0;
  l.entry = region_entry{(generation << slot_bits) | i, access_key, length, node};
  l.entry.address = reinterpret_cast<uintptr_t>(base);
  l.entry.device = device;
  if (device.location.is_gpu()) {
    // GPU memory is never in a host segment; a region that is not a GPU one has no device data.
  } else if (auto seg = find_segment(base, length)) {
    l.entry.segment_id = seg->segment_id;
    l.entry.segment_fd = seg->fd;
    l.entry.segment_offset = seg->offset;
    l.entry.segment_inode = seg->inode;
  }
  publish(i, l.entry);
  by_address_.emplace(reinterpret_cast<uintptr_t>(base), i);
  lengths_.insert(length);
  return region_handle{node, l.entry.region_id, 0, length, access_key};
}

caf::expected<region_handle> region_table::insert_grant(const region_handle& within,
                                                        uint64_t access_key) {
  std::lock_guard guard{mutex_};
  auto* region = live_slot(within);
  if (region == nullptr)
    return make_error(errc::not_found, "no registered region for " + to_string(within));
  if (region->parent != no_parent)
    return make_error(errc::invalid_argument,
                      "a grant is cut from its region's handle, not from " + to_string(within));
  if (auto err = check_access(region->entry, within, 0, within.length))
    return err;
  if (within.length == 0)
    return make_error(errc::invalid_argument, "a grant of no bytes: " + to_string(within));
  const auto parent = static_cast<uint32_t>(within.region_id & (capacity_max - 1));
  auto taken = take_slot();
  if (!taken)
    return std::move(taken.error());
  const uint32_t i = *taken;
  auto& l = local_[i];
  auto& p = local_[parent];
  const uint64_t generation = (l.entry.region_id >> slot_bits) + 1;
  l.base = p.base + within.offset;
  l.live = true;
  l.pins = 0;
  l.parent = parent;
  l.grants = 0;
  l.entry = p.entry; // where the bytes are, for other processes: moved by the grant's offset
  l.entry.region_id = (generation << slot_bits) | i;
  l.entry.access_key = access_key;
  l.entry.length = within.length;
  l.entry.address += within.offset;
  if (l.entry.segment_id != 0)
    l.entry.segment_offset += within.offset;
  if (l.entry.device.location.is_gpu())
    l.entry.device.alloc_offset += within.offset;
  publish(i, l.entry);
  ++p.grants;
  ++grants_;
  return region_handle{l.entry.node, l.entry.region_id, 0, within.length, access_key};
}

caf::error region_table::remove(const region_handle& h, slot_kind kind) {
  std::unique_lock guard{mutex_};
  auto* found = live_slot(h);
  if (found == nullptr)
    return make_error(errc::not_found, "unregister of unknown " + to_string(h));
  auto& l = *found;
  if (l.entry.access_key != h.access_key)
    return make_error(errc::access_denied, "wrong access key to unregister " + to_string(h));
  const bool is_grant = l.parent != no_parent;
  if (is_grant != (kind == slot_kind::grant))
    return make_error(errc::invalid_argument,
                      to_string(h) + (is_grant ? " is a grant: revoke it, not its region"
                                               : " is a whole region, not a grant"));
  const auto self = static_cast<uint32_t>(h.region_id & (capacity_max - 1));
  // Everything that goes: the slot, and a region's grants. Hidden from new operations here and
  // in other processes first; then this process's copies in flight end; then the slots are free.
  std::vector<uint32_t> going{self};
  if (!is_grant && l.grants > 0)
    for (uint32_t g = 0; g < local_.size(); ++g)
      if (local_[g].live && local_[g].parent == self)
        going.push_back(g);
  for (auto i : going) {
    auto& s = local_[i];
    s.live = false; // no new pins
    region_entry hidden = s.entry;
    hidden.region_id = 0;
    publish(i, hidden); // other processes stop seeing it now
  }
  if (!is_grant) {
    by_address_.erase({reinterpret_cast<uintptr_t>(l.base), self});
    lengths_.erase(lengths_.find(l.entry.length));
  }
  unpinned_.wait(guard, [&] {
    return std::all_of(going.begin(), going.end(), [&](uint32_t i) { return local_[i].pins == 0; });
  });
  for (auto i : going) {
    auto& s = local_[i];
    if (s.parent != no_parent) {
      --local_[s.parent].grants;
      --grants_;
    }
    s.base = nullptr;
    s.parent = no_parent;
    free_.push_back(i);
  }
  return caf::none;
}

uint64_t region_table::registered_id(const region_handle& h) {
  std::lock_guard guard{mutex_};
  const auto* l = live_slot(h);
  if (l == nullptr)
    return 0;
  return l->parent == no_parent ? l->entry.region_id : local_[l->parent].entry.region_id;
}

uint32_t region_table::grant_count() {
  std::lock_guard guard{mutex_};
  return grants_;
}

caf::expected<region_table::local_slot*> region_table::pin_slot(const region_handle& h,
                                                                uint64_t offset, uint64_t length) {
  const auto i = static_cast<uint32_t>(h.region_id & (capacity_max - 1));
  if (i >= local_.size() || !local_[i].live)
    return make_error(errc::not_found, "no registered region for " + to_string(h));
  auto& l = local_[i];
  if (auto err = check_access(l.entry, h, offset, length))
    return err;
  ++l.pins;
  return &l;
}

caf::expected<std::byte*> region_table::pin(const region_handle& h, uint64_t offset,
                                            uint64_t length) {
  auto region = pin_region(h, offset, length);
  if (!region)
    return std::move(region.error());
  return region->first + h.offset + offset;
}

caf::expected<std::pair<std::byte*, memory_location>>
region_table::pin_any(const region_handle& h, uint64_t offset, uint64_t length) {
  std::lock_guard guard{mutex_};
  auto l = pin_slot(h, offset, length);
  if (!l)
    return std::move(l.error());
  return std::make_pair((*l)->base + h.offset + offset, (*l)->entry.device.location);
}

std::optional<memory_location> region_table::location_of(const region_handle& h) {
  std::lock_guard guard{mutex_};
  const auto i = static_cast<uint32_t>(h.region_id & (capacity_max - 1));
  if (i >= local_.size() || !local_[i].live || local_[i].entry.region_id != h.region_id)
    return std::nullopt;
  return local_[i].entry.device.location;
}

caf::expected<std::pair<std::byte*, uint64_t>>
region_table::pin_region(const region_handle& h, uint64_t offset, uint64_t length) {
  std::lock_guard guard{mutex_};
  auto l = pin_slot(h, offset, length);
  if (!l)
    return std::move(l.error());
  if ((*l)->entry.device.location.is_gpu()) {
    const auto where = (*l)->entry.device.location;
    --(*l)->pins; // live: nobody waits for this pin to drop
    return refuse_gpu(h, where);
  }
  return std::make_pair((*l)->base, (*l)->entry.length);
}

caf::expected<region_handle> region_table::pin_address(const std::byte* p, uint64_t length) {
  const auto want = reinterpret_cast<uintptr_t>(p);
  if (p == nullptr || length > UINTPTR_MAX - want)
    return make_error(errc::invalid_argument, "a buffer that wraps around the address space");
  std::lock_guard guard{mutex_};
  if (lengths_.empty())
    return make_error(errc::not_found, "no region is registered");
  // A region holding the buffer starts at or below it, and no lower than the longest region
  // reaches: walk down from the buffer's address within that bound.
  const uint64_t longest = *lengths_.rbegin();
  auto i = by_address_.upper_bound({want, UINT32_MAX});
  for (size_t seen = 0; i != by_address_.begin() && seen < address_scan_max; ++seen) {
    --i;
    const uintptr_t base = i->first;
    if (want - base > longest)
      break;
    auto& l = local_[i->second];
    if (l.entry.device.location.is_gpu())
      continue; // no host buffer lies in GPU memory; RDMA never registers it
    if (want - base <= l.entry.length && length <= l.entry.length - (want - base)) {
      ++l.pins;
      return region_handle{l.entry.node, l.entry.region_id, 0, l.entry.length, l.entry.access_key};
    }
  }
  return make_error(errc::not_found, "no registered region holds the buffer");
}

void region_table::unpin(const region_handle& h) {
  std::lock_guard guard{mutex_};
  auto& l = local_[h.region_id & (capacity_max - 1)];
  if (--l.pins == 0 && !l.live)
    unpinned_.notify_all();
}

// -- readers in other processes ------------------------------------------------------------

caf::expected<std::unique_ptr<remote_region_table>>
remote_region_table::open(int32_t pid, int32_t fd, uint64_t size_bytes) {
  // Mapped pages past the end of the file would fault (SIGBUS) when read: the file must be
  // sealed against shrinking, and hold the size the peer's message claims.
  auto f = open_peer_file(pid, fd, O_RDONLY);
  if (!f)
    return make_error(errc::unavailable, "the region table: " + describe(f.error()));
  const int local = f->fd;
  const std::string& path = f->path;
  if (size_bytes == 0 || f->bytes < size_bytes) {
    close(local);
    return make_error(errc::unavailable, path + " is smaller than the " +
                                             std::to_string(size_bytes) +
                                             " bytes its owner advertised");
  }
  void* p = mmap(nullptr, size_bytes, PROT_READ, MAP_SHARED, local, 0);
  close(local); // the mapping keeps the file
  if (p == MAP_FAILED)
    return make_error(errc::unavailable,
                      "cannot map the region table " + path + ": " + std::strerror(errno));
  std::unique_ptr<remote_region_table> t{new remote_region_table};
  t->map_ = p;
  t->bytes_ = size_bytes;
  const auto* header = static_cast<const table_header*>(p);
  const uint64_t vc = header->version_capacity.load(std::memory_order_relaxed);
  t->capacity_ = static_cast<uint32_t>(vc & 0xffffffffu);
  if (header->magic.load(std::memory_order_acquire) != detail::table_magic ||
      (vc >> 32) != detail::table_version ||
      size_bytes < sizeof(table_header) + uint64_t{t->capacity_} * sizeof(table_slot))
    return make_error(errc::unavailable, path + " is not a region table of this version");
  return t;
}

remote_region_table::~remote_region_table() {
  if (map_ != nullptr)
    munmap(const_cast<void*>(map_), bytes_);
}

caf::expected<region_entry> remote_region_table::lookup(const region_handle& h, uint64_t offset,
                                                        uint64_t length) const {
  const auto i = static_cast<uint32_t>(h.region_id & (region_table::capacity_max - 1));
  if (i >= capacity_)
    return make_error(errc::not_found, "no registered region for " + to_string(h));
  const auto* s =
      reinterpret_cast<const table_slot*>(static_cast<const char*>(map_) + sizeof(table_header)) +
      i;
  region_entry e;
  // The owner writes a slot in nanoseconds. One that stays odd for long is a slot whose owner
  // died (or was stopped) halfway through writing it: give up rather than spin for ever.
  constexpr uint32_t spins_before_clock = 1024;
  constexpr auto mid_write_max = std::chrono::milliseconds(100);
  uint32_t spins = 0;
  std::chrono::steady_clock::time_point first_odd{};
  for (;;) {
    const uint64_t before = s->seq.load(std::memory_order_acquire);
    if (before % 2 == 1) {
      if (++spins < spins_before_clock)
        continue;
      const auto now = std::chrono::steady_clock::now();
      if (first_odd == std::chrono::steady_clock::time_point{})
        first_odd = now;
      if (now - first_odd > mid_write_max) // rare: the owner stopped mid-write
        return make_error(errc::unavailable,
                          "the owner of " + to_string(h) + " has left its region table mid-update");
      std::this_thread::yield();
      continue;
    }
    e.region_id = s->region_id.load(std::memory_order_relaxed);
    e.access_key = s->access_key.load(std::memory_order_relaxed);
    e.length = s->length.load(std::memory_order_relaxed);
    e.segment_id = s->segment_id.load(std::memory_order_relaxed);
    e.segment_offset = s->segment_offset.load(std::memory_order_relaxed);
    const uint64_t fd_node = s->fd_node.load(std::memory_order_relaxed);
    e.segment_inode = s->segment_inode.load(std::memory_order_relaxed);
    const uint64_t location = s->location.load(std::memory_order_relaxed);
    e.device.pci = s->pci.load(std::memory_order_relaxed);
    e.device.alloc_offset = s->alloc_offset.load(std::memory_order_relaxed);
    e.address = s->address.load(std::memory_order_relaxed);
    std::array<uint64_t, detail::ipc_words> ipc{};
    for (size_t w = 0; w < detail::ipc_words; ++w)
      ipc[w] = s->ipc_handle[w].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s->seq.load(std::memory_order_relaxed) != before)
      continue;
    e.segment_fd = static_cast<int32_t>(fd_node >> 32);
    e.node = static_cast<uint32_t>(fd_node & 0xffffffffu);
    const auto where = unpack_location(location);
    e.device.location = where.location;
    e.device.exportable = where.exportable;
    std::memcpy(e.device.ipc_handle.data(), ipc.data(), ipc_handle_bytes);
    break;
  }
  if (auto err = check_access(e, h, offset, length))
    return err;
  return e;
}

} // namespace crescent::transport
