// A real allocator for block storage: carves variable-sized ranges out of one contiguous space
// (a registered DRAM region, or an SSD file) without allocating memory per block.
//
// Two-level segregated fit: free ranges sit in 256 size bins (8 bins per power of two), found
// through two bitmaps in O(1); a request takes the first free range from the smallest bin that is
// guaranteed to fit, and the rest is split off; freeing merges a range with free neighbours.
// Waste is bounded by the bin rounding (under 12.5%) plus the unit.
//
// Sizes and offsets are in bytes and multiples of `unit_bytes`. Not thread-safe: owned by one
// actor. Every range has a node; nodes come from a fixed pool (ranges_max), so the allocator
// never allocates after construction.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace crescent::storage {

struct range {
  uint64_t offset = 0; // bytes
  uint64_t size = 0;   // bytes actually reserved (the request rounded up to the unit)
  uint32_t node = 0;   // the allocator's handle for free()
};

class range_allocator {
 public:
  /// `capacity_bytes` of space, handed out in multiples of `unit_bytes` (a power of two), at most
  /// `ranges_max` ranges (free and used) at once.
  range_allocator(uint64_t capacity_bytes, uint64_t unit_bytes, uint32_t ranges_max);

  /// A range of at least `size_bytes`, or nothing when no free range is large enough (or the
  /// node pool is exhausted).
  std::optional<range> allocate(uint64_t size_bytes);

  /// Returns a range from allocate(). Asserts it is allocated (freeing twice is a bug).
  void free(const range& r);

  /// Rebuilds a fresh allocator's state from ranges known to be in use (after a restart, from a
  /// persisted index): `used` sorted by offset, unit-aligned, not overlapping, inside the
  /// capacity. Returns each one's range in order, or nothing if they break those rules or need
  /// more than ranges_max nodes.
  std::optional<std::vector<range>> restore(const std::vector<std::pair<uint64_t, uint64_t>>& used);

  uint64_t capacity_bytes() const { return units_total_ * unit_; }
  uint64_t free_bytes() const { return units_free_ * unit_; }
  uint64_t used_bytes() const { return capacity_bytes() - free_bytes(); }
  uint32_t ranges_used() const { return ranges_used_; }

  /// Walks the structure and checks every invariant; for tests.
  bool consistent() const;

 private:
  static constexpr uint32_t bin_count = 256;
  static constexpr uint32_t none = UINT32_MAX;

  struct node {
    uint64_t offset = 0;                         // units
    uint64_t size = 0;                           // units
    uint32_t prev_free = none, next_free = none; // within its bin
    uint32_t prev_phys = none, next_phys = none; // address order
    uint32_t bin = none;
    bool used = false;
  };

  uint32_t insert_free(uint64_t offset, uint64_t size, uint32_t prev_phys, uint32_t next_phys);
  void unlink_free(uint32_t n);
  uint32_t find_bin(uint32_t min_bin) const;
  uint32_t new_node();

  uint64_t unit_;
  uint64_t units_total_;
  uint64_t units_free_;
  uint32_t ranges_used_ = 0;
  std::vector<node> nodes_;
  std::vector<uint32_t> spare_; // unused node ids
  uint32_t bin_heads_[bin_count];
  uint32_t top_bits_ = 0;     // bit i: some bin in [8i, 8i + 8) is non-empty
  uint8_t bin_bits_[32] = {}; // bit j of byte i: bin 8i + j is non-empty
};

} // namespace crescent::storage
