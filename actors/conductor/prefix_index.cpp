#include "actors/conductor/prefix_index.hpp"

#include <bit>
#include <cassert>

namespace crescent {

namespace {

// The narrow form's mask of `node` (node < 64).
uint64_t bit_of(uint32_t node) {
  return uint64_t{1} << node;
}

} // namespace

void prefix_index::widen() {
  narrow_.for_each([&](block_key key, uint64_t mask) {
    node_set& s = wide_.insert(key);
    for (uint64_t m = mask; m != 0; m &= m - 1)
      s.insert(static_cast<uint32_t>(std::countr_zero(m)));
  });
  narrow_ = decltype(narrow_){};
  is_wide_ = true;
}

void prefix_index::add(block_key key, uint32_t node) {
  assert(node < node_set::capacity);
  if (!is_wide_ && node >= 64)
    widen();
  if (!is_wide_) {
    if (narrow_.find(key) == nullptr && narrow_.size() >= entries_max)
      return;
    narrow_.insert(key) |= bit_of(node);
    return;
  }
  if (wide_.find(key) == nullptr && wide_.size() >= entries_max)
    return;
  wide_.insert(key).insert(node);
}

void prefix_index::remove(block_key key, uint32_t node) {
  assert(node < node_set::capacity);
  if (!is_wide_) {
    auto* mask = node < 64 ? narrow_.find(key) : nullptr;
    if (mask == nullptr)
      return;
    if ((*mask &= ~bit_of(node)) == 0) {
      *mask = bit_of(node); // erase finds the entry by a non-empty value
      narrow_.erase(key);
    }
    return;
  }
  auto* nodes = wide_.find(key);
  if (nodes == nullptr)
    return;
  if (nodes->size() == 1 && nodes->contains(node)) {
    wide_.erase(key);
    return;
  }
  nodes->erase(node);
}

void prefix_index::remove_node(uint32_t node) {
  assert(node < node_set::capacity);
  // Values emptied here are dropped by the rebuild after: a rare path (a node that failed).
  if (!is_wide_) {
    if (node >= 64)
      return;
    narrow_.for_each([&](const block_key&, uint64_t& mask) { mask &= ~bit_of(node); });
    narrow_.drop_empty();
    return;
  }
  wide_.for_each([&](const block_key&, node_set& s) { s.erase(node); });
  wide_.drop_empty();
}

bool prefix_index::holds(block_key key, uint32_t node) const {
  if (!is_wide_) {
    const auto* mask = node < 64 ? narrow_.find(key) : nullptr;
    return mask != nullptr && (*mask & bit_of(node)) != 0;
  }
  const auto* nodes = wide_.find(key);
  return nodes != nullptr && nodes->contains(node);
}

uint32_t prefix_index::cached_prefix(std::span<const block_key> keys, uint32_t node) const {
  assert(node < node_set::capacity);
  uint32_t n = 0;
  for (auto key : keys) {
    if (!holds(key, node))
      break;
    ++n;
  }
  return n;
}

node_set prefix_index::holders(block_key key) const {
  if (is_wide_) {
    const auto* nodes = wide_.find(key);
    return nodes == nullptr ? node_set{} : *nodes;
  }
  node_set out;
  const auto* mask = narrow_.find(key);
  for (uint64_t m = mask == nullptr ? 0 : *mask; m != 0; m &= m - 1)
    out.insert(static_cast<uint32_t>(std::countr_zero(m)));
  return out;
}

prefix_match prefix_index::match(std::span<const block_key> keys, const prefix_index* ssd) const {
  const bool tiers = ssd != nullptr && ssd->size() != 0;
  auto out = tiers ? match_tiers(keys, *ssd) : match_dram(keys);
  // Nodes past 64 hold nothing in the narrow form: their lengths stay 0.
  const uint32_t nodes = is_wide_ || (tiers && ssd->is_wide_) ? node_set::capacity : 64;
  for (uint32_t n = 0; n < nodes; ++n)
    if (out.length[n] > out.best) {
      out.best = out.length[n];
      out.best_node = n;
    }
  return out;
}

prefix_match prefix_index::match_tiers(std::span<const block_key> keys,
                                       const prefix_index& ssd) const {
  prefix_match out;
  size_t i = 0;
  if (!is_wide_ && !ssd.is_wide_) {
    uint64_t still = ~uint64_t{0}; // nodes that hold every key so far, in DRAM or on SSD
    for (; i < keys.size() && still != 0; ++i) {
      const auto* d = narrow_.find(keys[i]);
      const auto* s = ssd.narrow_.find(keys[i]);
      const uint64_t in_dram = d == nullptr ? 0 : *d;
      const uint64_t on_ssd = s == nullptr ? 0 : *s;
      const uint64_t held = in_dram | on_ssd;
      for (uint64_t dropped = still & ~held; dropped != 0; dropped &= dropped - 1)
        out.length[std::countr_zero(dropped)] = static_cast<uint32_t>(i);
      still &= held;
      for (uint64_t only = still & ~in_dram; only != 0; only &= only - 1)
        ++out.on_ssd[std::countr_zero(only)];
    }
    for (; still != 0; still &= still - 1)
      out.length[std::countr_zero(still)] = static_cast<uint32_t>(i);
    return out;
  }
  node_set still = node_set::all();
  for (; i < keys.size() && !still.empty(); ++i) {
    const node_set in_dram = holders(keys[i]);
    node_set held = in_dram;
    held |= ssd.holders(keys[i]);
    still.without(held).for_each([&](uint32_t n) { out.length[n] = static_cast<uint32_t>(i); });
    still &= held;
    still.without(in_dram).for_each([&](uint32_t n) { ++out.on_ssd[n]; });
  }
  still.for_each([&](uint32_t n) { out.length[n] = static_cast<uint32_t>(i); });
  return out;
}

prefix_match prefix_index::match_dram(std::span<const block_key> keys) const {
  prefix_match out;
  size_t i = 0;
  if (!is_wide_) {
    uint64_t still = ~uint64_t{0}; // nodes that hold every key so far
    for (; i < keys.size() && still != 0; ++i) {
      const auto* h = narrow_.find(keys[i]);
      const uint64_t held = h == nullptr ? 0 : *h;
      for (uint64_t dropped = still & ~held; dropped != 0; dropped &= dropped - 1)
        out.length[std::countr_zero(dropped)] = static_cast<uint32_t>(i);
      still &= held;
    }
    for (; still != 0; still &= still - 1)
      out.length[std::countr_zero(still)] = static_cast<uint32_t>(i);
  } else {
    node_set still = node_set::all();
    for (; i < keys.size() && !still.empty(); ++i) {
      const auto* h = wide_.find(keys[i]);
      const node_set held = h == nullptr ? node_set{} : *h;
      still.without(held).for_each([&](uint32_t n) { out.length[n] = static_cast<uint32_t>(i); });
      still &= held;
    }
    still.for_each([&](uint32_t n) { out.length[n] = static_cast<uint32_t>(i); });
  }
  return out;
}

} // namespace crescent
