#include "storage/eviction.hpp"

#include <cassert>
#include <limits>

namespace crescent::storage {

bool parse(std::string_view text, eviction_policy& out) {
  if (text == "lru")
    out = eviction_policy::lru;
  else if (text == "lfu")
    out = eviction_policy::lfu;
  else if (text == "length_aware")
    out = eviction_policy::length_aware;
  else
    return false;
  return true;
}

const char* to_string(eviction_policy p) {
  switch (p) {
  case eviction_policy::lru:
    return "lru";
  case eviction_policy::lfu:
    return "lfu";
  case eviction_policy::length_aware:
    return "length_aware";
  }
  return "unknown";
}

eviction_index::rank eviction_index::rank_of(block_key key, const entry& e) const {
  switch (policy_) {
  case eviction_policy::lru:
    return {e.last_use, 0, key};
  case eviction_policy::lfu:
    return {e.uses, e.last_use, key};
  case eviction_policy::length_aware:
    return {std::numeric_limits<uint32_t>::max() - e.position, e.last_use, key};
  }
  return {0, 0, key};
}

void eviction_index::insert(block_key key, uint64_t size_bytes, uint32_t chain_position) {
  if (auto i = entries_.find(key); i != entries_.end()) {
    touch(key);
    return;
  }
  entry e{size_bytes, chain_position, 1, ++clock_};
  order_.insert(rank_of(key, e));
  entries_.emplace(key, e);
}

void eviction_index::touch(block_key key) {
  auto i = entries_.find(key);
  if (i == entries_.end())
    return;
  order_.erase(rank_of(key, i->second));
  ++i->second.uses;
  i->second.last_use = ++clock_;
  order_.insert(rank_of(key, i->second));
}

void eviction_index::erase(block_key key) {
  auto i = entries_.find(key);
  if (i == entries_.end())
    return;
  order_.erase(rank_of(key, i->second));
  entries_.erase(i);
}

std::vector<block_key>
eviction_index::victims(uint64_t bytes, size_t count_max,
                        const std::function<bool(const block_key&)>& keep) const {
  std::vector<block_key> out;
  uint64_t freed = 0;
  for (const auto& r : order_) {
    if (freed >= bytes || out.size() >= count_max)
      break;
    const block_key key = std::get<2>(r);
    if (keep && keep(key))
      continue;
    out.push_back(key);
    freed += entries_.at(key).size_bytes;
  }
  return out;
}

} // namespace crescent::storage
