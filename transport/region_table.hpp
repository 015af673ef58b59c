// The table of registered regions, kept in a shared memory file so that other processes on the
// host can check handles and find the bytes without asking (the shm path). The owner writes it;
// readers map it read-only and read each slot under a sequence lock.
//
// Region ids are (generation << 20) | slot: an unregistered region's id is never valid again,
// even after its slot is reused.
//
// Owner side: pin() validates a handle and keeps the region registered while bytes are copied;
// remove() hides the region from new operations at once, then waits for this process's pins to
// drop. A copy that another process started before the removal may still finish.
//
// Grants: a slot of its own (region id, access key) for a sub-range of a registered region, cut
// by the region's owner without registering memory again. Other processes see a grant as a
// region of exactly its bytes; nothing in a grant's handle reaches the bytes around it, and a
// removed grant's handle fails at once on every path that checks the table. Removing a region
// removes its grants with it. A grant is never cut from another grant.
//
// pin_address() finds the region that holds a local buffer: one-sided RDMA needs the buffer of
// an operation to be registered memory, and keeps its region pinned while the NIC uses it.
//
// GPU regions: every entry records where its bytes are (memory_location). A GPU region also
// publishes what another process on the host needs to open it with CUDA IPC: the allocation's
// IPC handle, the region's offset in that allocation and the device's PCI address (device
// ordinals differ between processes with different CUDA_VISIBLE_DEVICES). pin() and
// pin_region() refuse GPU regions (unavailable): their callers (the in-process memcpy path and
// the TCP server, hence RDMA describes) handle host memory only. The cuda path uses pin_any().
#pragma once

#include "transport/memory_location.hpp"
#include "transport/region_handle.hpp"

#include <caf/expected.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace crescent::transport {

inline constexpr size_t ipc_handle_bytes = 64; // CUDA_IPC_HANDLE_SIZE

/// What other processes on the host need to reach a GPU region; unused for host memory.
struct device_export {
  memory_location location;
  bool exportable = false;   // an IPC handle exists (cudaMalloc'd memory; not VMM or pools)
  uint64_t pci = 0;          // PCI domain << 16 | bus << 8 | device, of the GPU holding the bytes
  uint64_t alloc_offset = 0; // of the region's first byte within its allocation
  std::array<std::byte, ipc_handle_bytes> ipc_handle{}; // cudaIpcMemHandle_t of the allocation
};

/// A region as every process on the host can see it.
struct region_entry {
  uint64_t region_id = 0;
  uint64_t access_key = 0;
  uint64_t length = 0;
  uint32_t node = 0;
  uint64_t segment_id = 0;    // 0: not in shared memory; else unique in the owner, never reused
  int32_t segment_fd = -1;    // the owner's fd of the segment
  uint64_t segment_inode = 0; // what that fd must refer to, checked when a peer opens it
  uint64_t segment_offset = 0;
  uint64_t address = 0; // the owner's address of the region's first byte (host or device)
  device_export device{};
};

/// Checks a handle and an operation range against a region: the key, the handle inside the
/// region, the operation inside the handle. Written so that no sum can overflow.
caf::error check_access(const region_entry& e, const region_handle& h, uint64_t offset,
                        uint64_t length);

namespace detail {
struct table_header;
struct table_slot;
} // namespace detail

class region_table {
 public:
  static constexpr uint32_t slot_bits = 20;
  static constexpr uint32_t capacity_max = 1u << slot_bits;

  static caf::expected<std::unique_ptr<region_table>> create(uint32_t capacity);
  ~region_table();

  caf::expected<region_handle> insert(uint32_t node, std::byte* base, uint64_t length,
                                      uint64_t access_key, const device_export& device = {});

  /// A grant for exactly the bytes of `within`, a handle of a live region (not of a grant) with
  /// that region's key, under `access_key`. limit_exceeded when the table is full.
  caf::expected<region_handle> insert_grant(const region_handle& within, uint64_t access_key);

  enum class slot_kind : uint8_t { region, grant };

  /// Removes a region (with its grants) or a grant: `kind` says which `h` must be, so that a
  /// caller never ends a whole region when it meant one grant (invalid_argument otherwise).
  caf::error remove(const region_handle& h, slot_kind kind = slot_kind::region);

  /// The id of the registered region whose memory `h` lies in: its own, or its region's for a
  /// grant; 0 when `h` names nothing live. Its memory registrations (RDMA) are that region's.
  uint64_t registered_id(const region_handle& h);

  /// Live grants, for tests and statistics.
  uint32_t grant_count();

  /// Host memory behind [offset, offset + length) of `h`, held registered until unpin.
  /// unavailable for a GPU region.
  caf::expected<std::byte*> pin(const region_handle& h, uint64_t offset, uint64_t length);

  /// As pin, for host and GPU regions alike: the address and where it is.
  caf::expected<std::pair<std::byte*, memory_location>> pin_any(const region_handle& h,
                                                                uint64_t offset, uint64_t length);

  /// Where the region of `h` lives, if it is registered (its handle is not checked: this only
  /// chooses a path, and every path checks the handle).
  std::optional<memory_location> location_of(const region_handle& h);
  void unpin(const region_handle& h);

  /// As pin, and tells where the whole region lies: its first byte and its length.
  caf::expected<std::pair<std::byte*, uint64_t>> pin_region(const region_handle& h, uint64_t offset,
                                                            uint64_t length);

  /// Candidates looked at by pin_address, at most: overlapping regions beyond this many below
  /// an address make it answer not_found (the caller then uses a path that needs no region).
  static constexpr size_t address_scan_max = 256;

  /// A live region holding all of [p, p + length), pinned; a handle to the whole region comes
  /// back, for unpin. not_found if no registered region holds that memory.
  caf::expected<region_handle> pin_address(const std::byte* p, uint64_t length);

  int fd() const { return fd_; }
  uint64_t size_bytes() const { return bytes_; }
  uint32_t capacity() const { return capacity_; }

 private:
  region_table() = default;
  detail::table_slot* slot(uint32_t i) const;
  void publish(uint32_t i, const region_entry& e);

  static constexpr uint32_t no_parent = UINT32_MAX;

  struct local_slot {
    std::byte* base = nullptr;
    region_entry entry;
    uint32_t pins = 0;
    bool live = false;
    uint32_t parent = no_parent; // a grant: the slot of its region
    uint32_t grants = 0;         // a region: its live grants
  };

  /// A free slot, made if need be; the caller holds mutex_.
  caf::expected<uint32_t> take_slot();
  /// The live slot `h` names (id and generation), or nullptr; the caller holds mutex_.
  local_slot* live_slot(const region_handle& h);

  /// Checks `h` and the range against a live region and pins it; the caller holds mutex_.
  caf::expected<local_slot*> pin_slot(const region_handle& h, uint64_t offset, uint64_t length);

  int fd_ = -1;
  void* map_ = nullptr;
  uint64_t bytes_ = 0;
  uint32_t capacity_ = 0;
  std::mutex mutex_;
  std::condition_variable unpinned_;
  std::deque<local_slot> local_; // slots made so far (remove() holds a reference while waiting)
  std::vector<uint32_t> free_;   // of those, the unused ones
  uint32_t grants_ = 0;          // live grants
  std::set<std::pair<uintptr_t, uint32_t>> by_address_; // live regions, not grants: (base, slot)
  std::multiset<uint64_t> lengths_;                     // of live regions, for the scan's bound
};

/// Another process's region table, mapped read-only.
class remote_region_table {
 public:
  /// Maps the table `fd` of process `pid` (through /proc/<pid>/fd). Fails when this process may
  /// not open it (another user, ptrace restrictions) or when it is not a region table.
  static caf::expected<std::unique_ptr<remote_region_table>> open(int32_t pid, int32_t fd,
                                                                  uint64_t size_bytes);
  ~remote_region_table();

  /// The region of `h`, checked against the handle and the operation range.
  caf::expected<region_entry> lookup(const region_handle& h, uint64_t offset,
                                     uint64_t length) const;

 private:
  remote_region_table() = default;
  const void* map_ = nullptr;
  uint64_t bytes_ = 0;
  uint32_t capacity_ = 0;
};

} // namespace crescent::transport
