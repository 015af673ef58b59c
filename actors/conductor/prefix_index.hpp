// The conductor's global prefix index: which nodes hold which blocks. It is a hint for
// placement, learned from prefill reports; the store master stays the authority on what can be
// read, so a stale or missing entry costs a worse placement, never wrong data. The conductor
// keeps two: blocks in the nodes' DRAM, and blocks on their SSD tiers (offloaded there).
#pragma once

#include "actors/common/node_set.hpp"
#include "actors/conductor/flat_key_map.hpp"
#include "messages/block_key.hpp"

#include <array>
#include <cstdint>
#include <span>

namespace crescent {

/// Leading keys of a prompt that each node holds, and the longest of them.
struct prefix_match {
  std::array<uint32_t, node_set::capacity> length{}; // per node
  uint32_t best = 0;                                 // the longest
  uint32_t best_node = 0; // the lowest node holding the longest (0 when best is 0)
  // Per node, how many of its `length` keys it holds only on its SSD tier (match with an SSD
  // index): a load reads them from the drive first.
  std::array<uint32_t, node_set::capacity> on_ssd{};
};

class prefix_index {
 public:
  /// Entries kept at most; beyond it new blocks are not indexed (placement gets worse, nothing
  /// breaks). Nodes are a node_set, hence at most node_set::capacity (256) nodes.
  static constexpr size_t entries_max = 1u << 22;

  void add(block_key key, uint32_t node);
  /// The block left that node (evicted); forgotten when no node holds it.
  void remove(block_key key, uint32_t node);
  void remove_node(uint32_t node);

  /// Number of leading keys held on `node`.
  uint32_t cached_prefix(std::span<const block_key> keys, uint32_t node) const;

  /// Every node's leading keys at once, in one pass over the keys (a node drops out at its
  /// first miss): time proportional to the prompt's blocks, not to nodes times blocks. With
  /// `ssd` (the blocks on the nodes' SSD tiers; null or empty: none), a node holds a key in
  /// this index or in that one, and prefix_match::on_ssd counts those only in `ssd`.
  prefix_match match(std::span<const block_key> keys, const prefix_index* ssd = nullptr) const;

  size_t size() const { return is_wide_ ? wide_.size() : narrow_.size(); }

 private:
  // Key -> the nodes holding it: a 64-bit mask while every node id seen is below 64 (most
  // clusters; an entry half the size, which is what a placement's lookups touch), a node_set
  // from the first add of a node past 63 on.
  void widen();
  bool holds(block_key key, uint32_t node) const;
  /// The nodes holding `key`, in either form.
  node_set holders(block_key key) const;
  prefix_match match_dram(std::span<const block_key> keys) const;
  prefix_match match_tiers(std::span<const block_key> keys, const prefix_index& ssd) const;

  struct no_bits {
    bool operator()(uint64_t mask) const { return mask == 0; }
  };
  struct no_nodes {
    bool operator()(const node_set& s) const { return s.empty(); }
  };
  flat_key_map<uint64_t, no_bits> narrow_;
  flat_key_map<node_set, no_nodes> wide_;
  bool is_wide_ = false;
};

} // namespace crescent
