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
  wide_.reserve(narrow_.size());
  for (const auto& [key, mask] : narrow_) {
    node_set s;
    for (uint64_t m = mask; m != 0; m &= m - 1)
      s.insert(static_cast<uint32_t>(std::countr_zero(m)));
    wide_.emplace(key, s);
  }
  narrow_ = {};
  is_wide_ = true;
}

void prefix_index::add(uint64_t key, uint32_t node) {
  assert(node < node_set::capacity);
  if (!is_wide_ && node >= 64)
    widen();
  if (!is_wide_) {
    auto i = narrow_.find(key);
    if (i == narrow_.end()) {
      if (narrow_.size() >= entries_max)
        return;
      i = narrow_.emplace(key, 0).first;
    }
    i->second |= bit_of(node);
    return;
  }
  auto i = wide_.find(key);
  if (i == wide_.end()) {
    if (wide_.size() >= entries_max)
      return;
    i = wide_.emplace(key, node_set{}).first;
  }
  i->second.insert(node);
}

void prefix_index::remove(uint64_t key, uint32_t node) {
  assert(node < node_set::capacity);
  if (!is_wide_) {
    auto i = node < 64 ? narrow_.find(key) : narrow_.end();
    if (i == narrow_.end())
      return;
    i->second &= ~bit_of(node);
    if (i->second == 0)
      narrow_.erase(i);
    return;
  }
  auto i = wide_.find(key);
  if (i == wide_.end())
    return;
  i->second.erase(node);
  if (i->second.empty())
    wide_.erase(i);
}

void prefix_index::remove_node(uint32_t node) {
  assert(node < node_set::capacity);
  if (!is_wide_) {
    if (node >= 64)
      return;
    for (auto i = narrow_.begin(); i != narrow_.end();) {
      i->second &= ~bit_of(node);
      i = i->second == 0 ? narrow_.erase(i) : std::next(i);
    }
    return;
  }
  for (auto i = wide_.begin(); i != wide_.end();) {
    i->second.erase(node);
    i = i->second.empty() ? wide_.erase(i) : std::next(i);
  }
}

bool prefix_index::holds(uint64_t key, uint32_t node) const {
  if (!is_wide_) {
    auto i = node < 64 ? narrow_.find(key) : narrow_.end();
    return i != narrow_.end() && (i->second & bit_of(node)) != 0;
  }
  auto i = wide_.find(key);
  return i != wide_.end() && i->second.contains(node);
}

uint32_t prefix_index::cached_prefix(std::span<const uint64_t> keys, uint32_t node) const {
  assert(node < node_set::capacity);
  uint32_t n = 0;
  for (auto key : keys) {
    if (!holds(key, node))
      break;
    ++n;
  }
  return n;
}

prefix_match prefix_index::match(std::span<const uint64_t> keys) const {
  prefix_match out;
  size_t i = 0;
  if (!is_wide_) {
    uint64_t still = ~uint64_t{0}; // nodes that hold every key so far
    for (; i < keys.size() && still != 0; ++i) {
      auto h = narrow_.find(keys[i]);
      const uint64_t held = h == narrow_.end() ? 0 : h->second;
      for (uint64_t dropped = still & ~held; dropped != 0; dropped &= dropped - 1)
        out.length[std::countr_zero(dropped)] = static_cast<uint32_t>(i);
      still &= held;
    }
    for (; still != 0; still &= still - 1)
      out.length[std::countr_zero(still)] = static_cast<uint32_t>(i);
  } else {
    node_set still = node_set::all();
    for (; i < keys.size() && !still.empty(); ++i) {
      auto h = wide_.find(keys[i]);
      const node_set held = h == wide_.end() ? node_set{} : h->second;
      still.without(held).for_each([&](uint32_t n) { out.length[n] = static_cast<uint32_t>(i); });
      still &= held;
    }
    still.for_each([&](uint32_t n) { out.length[n] = static_cast<uint32_t>(i); });
  }
  // Nodes past 64 hold nothing in the narrow form: their lengths stay 0.
  const uint32_t nodes = is_wide_ ? node_set::capacity : 64;
  for (uint32_t n = 0; n < nodes; ++n)
    if (out.length[n] > out.best) {
      out.best = out.length[n];
      out.best_node = n;
    }
  return out;
}

} // namespace crescent
