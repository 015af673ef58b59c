// The transfer engine: registered memory regions and one-sided reads and writes through handles.
//
// This is the in-process engine of the walking skeleton: every region lives in this process and
// an operation is a bounds- and key-checked memcpy. The TCP, shared-memory and RDMA backends of
// the full engine plug in behind the same calls (issue 3).
//
// Contract:
// - An operation touches memory only after every check passed: the region exists, the access
//   key matches, the handle lies inside the region and the operation inside the handle. A
//   refused operation changes nothing and returns the reason.
// - A region's owner must keep its memory mapped until unregister_region returns; operations in
//   flight finish before unregistration proceeds, so an operation never sees freed memory.
// - All calls are thread-safe.
#pragma once

#include "transport/region_handle.hpp"

#include <caf/expected.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <span>
#include <unordered_map>

namespace crescent::transport {

struct transfer_metrics {
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t operations = 0;
  uint64_t refused = 0;
};

class transfer_engine {
 public:
  /// Regions registered at once, at most.
  static constexpr size_t regions_max = 1u << 20;
  /// Largest single region: 1 TiB.
  static constexpr uint64_t region_bytes_max = 1ull << 40;

  /// `key_seed` seeds the access keys; 0 draws one from std::random_device.
  explicit transfer_engine(uint64_t key_seed = 0);

  transfer_engine(const transfer_engine&) = delete;
  transfer_engine& operator=(const transfer_engine&) = delete;

  /// Registers [base, base + length_bytes) as memory of `node` and returns a handle covering
  /// all of it. Cut sub-handles with region_handle::slice.
  caf::expected<region_handle> register_region(uint32_t node, std::byte* base,
                                               uint64_t length_bytes);

  /// Forgets a region; later operations on its handles fail with not_found.
  caf::error unregister_region(const region_handle& region);

  /// Copies dst.size() bytes starting `offset` bytes into `src` into dst.
  caf::error read(const region_handle& src, uint64_t offset, std::span<std::byte> dst);

  /// Copies src into `dst`, starting `offset` bytes into it.
  caf::error write(const region_handle& dst, uint64_t offset, std::span<const std::byte> src);

  /// Copies all of `src` into the start of `dst` (dst.length >= src.length).
  caf::error copy(const region_handle& src, const region_handle& dst);

  transfer_metrics metrics() const;

 private:
  struct region {
    uint32_t node;
    std::byte* base;
    uint64_t length;
    uint64_t access_key;
  };

  /// Resolves [offset, offset + len) of `h` to memory, or says why not. Caller holds mutex_.
  caf::expected<std::byte*> resolve(const region_handle& h, uint64_t offset, uint64_t len) const;

  mutable std::shared_mutex mutex_;
  std::unordered_map<uint64_t, region> regions_;
  uint64_t next_region_id_ = 1;
  uint64_t key_state_;
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> operations_{0};
  mutable std::atomic<uint64_t> refused_{0};
};

} // namespace crescent::transport
