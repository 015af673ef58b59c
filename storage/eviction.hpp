// Which blocks to evict first. Each policy orders a node's evictable blocks; the block owner asks
// for victims when its DRAM use passes the high watermark, and skips what it may not evict
// (leased, pinned, in flight), which this index does not know about.
//
//  - lru: least recently used first (the default).
//  - lfu: least frequently used first, least recently used among equals.
//  - length_aware: deepest in its prefix chain first, least recently used among equals. Block i
//    of a prompt is reusable only by requests that share blocks 0..i, so deeper blocks are
//    reused less; keeping the shallow ones keeps the most prefix hits per byte.
#pragma once

#include "messages/block_key.hpp"

#include <cstdint>
#include <functional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace crescent::storage {

enum class eviction_policy { lru, lfu, length_aware };

/// Parses "lru", "lfu" or "length_aware".
bool parse(std::string_view text, eviction_policy& out);
const char* to_string(eviction_policy p);

class eviction_index {
 public:
  explicit eviction_index(eviction_policy policy) : policy_(policy) {}

  /// A new block; `chain_position` is its index in its prompt's chain of blocks.
  void insert(block_key key, uint64_t size_bytes, uint32_t chain_position);
  /// The block was read.
  void touch(block_key key);
  void erase(block_key key);
  bool contains(block_key key) const { return entries_.count(key) != 0; }
  size_t size() const { return entries_.size(); }

  /// Blocks in eviction order until their sizes add up to `bytes` (or `count_max` blocks), leaving
  /// out those for which `keep(key)` is true.
  std::vector<block_key> victims(uint64_t bytes, size_t count_max,
                                 const std::function<bool(const block_key&)>& keep) const;

 private:
  struct entry {
    uint64_t size_bytes;
    uint32_t position;
    uint64_t uses;
    uint64_t last_use;
  };
  using rank = std::tuple<uint64_t, uint64_t, block_key>; // (primary, secondary, key)

  rank rank_of(block_key key, const entry& e) const;

  eviction_policy policy_;
  uint64_t clock_ = 0; // a logical clock: a touch is a tick, so order never depends on time
  std::unordered_map<block_key, entry> entries_;
  std::set<rank> order_;
};

} // namespace crescent::storage
