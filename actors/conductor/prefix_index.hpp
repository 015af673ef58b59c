// The conductor's global prefix index: which nodes hold which blocks. It is a hint for
// placement, learned from prefill reports; the store master stays the authority on what can be
// read, so a stale or missing entry costs a worse placement, never wrong data.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>

namespace crescent {

class prefix_index {
 public:
  /// Entries kept at most; beyond it new blocks are not indexed (placement gets worse, nothing
  /// breaks). Nodes are a 64-bit mask, hence at most 64 nodes.
  static constexpr size_t entries_max = 1u << 22;

  void add(uint64_t key, uint32_t node);
  void remove_node(uint32_t node);

  /// Number of leading keys held on `node`.
  uint32_t cached_prefix(std::span<const uint64_t> keys, uint32_t node) const;

  size_t size() const { return holders_.size(); }

 private:
  std::unordered_map<uint64_t, uint64_t> holders_; // key -> mask of nodes
};

} // namespace crescent
