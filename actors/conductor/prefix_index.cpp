#include "actors/conductor/prefix_index.hpp"

#include <bit>
#include <cassert>

namespace crescent {

void prefix_index::add(uint64_t key, uint32_t node) {
  assert(node < 64);
  auto i = holders_.find(key);
  if (i == holders_.end()) {
    if (holders_.size() >= entries_max)
      return;
    holders_.emplace(key, uint64_t{1} << node);
    return;
  }
  i->second |= uint64_t{1} << node;
}

void prefix_index::remove(uint64_t key, uint32_t node) {
  assert(node < 64);
  auto i = holders_.find(key);
  if (i == holders_.end())
    return;
  i->second &= ~(uint64_t{1} << node);
  if (i->second == 0)
    holders_.erase(i);
}

void prefix_index::remove_node(uint32_t node) {
  assert(node < 64);
  const uint64_t bit = uint64_t{1} << node;
  for (auto i = holders_.begin(); i != holders_.end();) {
    i->second &= ~bit;
    i = i->second == 0 ? holders_.erase(i) : std::next(i);
  }
}

uint32_t prefix_index::cached_prefix(std::span<const uint64_t> keys, uint32_t node) const {
  assert(node < 64);
  const uint64_t bit = uint64_t{1} << node;
  uint32_t n = 0;
  for (auto key : keys) {
    auto i = holders_.find(key);
    if (i == holders_.end() || (i->second & bit) == 0)
      break;
    ++n;
  }
  return n;
}

prefix_match prefix_index::match(std::span<const uint64_t> keys) const {
  prefix_match out;
  uint64_t still = ~uint64_t{0}; // nodes that hold every key so far
  size_t i = 0;
  for (; i < keys.size() && still != 0; ++i) {
    auto h = holders_.find(keys[i]);
    const uint64_t held = h == holders_.end() ? 0 : h->second;
    for (uint64_t dropped = still & ~held; dropped != 0; dropped &= dropped - 1)
      out.length[std::countr_zero(dropped)] = static_cast<uint32_t>(i);
    still &= held;
  }
  for (; still != 0; still &= still - 1)
    out.length[std::countr_zero(still)] = static_cast<uint32_t>(i);
  for (uint32_t n = 0; n < out.length.size(); ++n)
    if (out.length[n] > out.best) {
      out.best = out.length[n];
      out.best_node = n;
    }
  return out;
}

} // namespace crescent
