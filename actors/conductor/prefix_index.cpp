#include "actors/conductor/prefix_index.hpp"

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

} // namespace crescent
