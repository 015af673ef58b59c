// An open-addressing hash map from block keys to small values, for the prefix index: one probe
// sequence in one array, so a lookup of a block key costs about one cache miss where a
// std::unordered_map costs two or three (bucket, node, and the node's key), and the index is
// looked up about 30 times a placement over a million blocks (crescent bench conductor).
//
// Linear probing at a load factor of at most 5/8, doubling as it grows; erasure by backward
// shift, so there are no tombstones and probe sequences stay short after evictions. A slot is
// free when its value is the value type's empty one: the map never holds an empty value (the
// index forgets a block that no node holds), which `insert` callers must keep true by filling
// the value they get before any other call.
#pragma once

#include "messages/block_key.hpp"

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace crescent {

/// `V` is default-constructible to its empty value, and `is_empty(const V&)` says whether a
/// value is that.
template <class V, class IsEmpty>
class flat_key_map {
 public:
  struct slot {
    block_key key;
    V value{};
  };

  explicit flat_key_map(IsEmpty is_empty = {}) : is_empty_(is_empty) {}

  size_t size() const { return size_; }
  size_t capacity_slots() const { return slots_.size(); }

  V* find(block_key key) { return const_cast<V*>(std::as_const(*this).find(key)); }
  const V* find(block_key key) const {
    if (slots_.empty())
      return nullptr;
    for (size_t i = home(key);; i = next(i)) {
      const auto& s = slots_[i];
      if (is_empty_(s.value))
        return nullptr;
      if (s.key == key)
        return &s.value;
    }
  }

  /// The value of `key`, added empty when absent: the caller makes it non-empty at once.
  V& insert(block_key key) {
    if (auto* v = find(key))
      return *v;
    if ((size_ + 1) * 8 > slots_.size() * 5)
      grow();
    size_t i = home(key);
    while (!is_empty_(slots_[i].value))
      i = next(i);
    slots_[i].key = key;
    ++size_;
    return slots_[i].value;
  }

  /// Forgets `key`; false when it was not held.
  bool erase(block_key key) {
    if (slots_.empty())
      return false;
    size_t i = home(key);
    for (;; i = next(i)) {
      if (is_empty_(slots_[i].value))
        return false;
      if (slots_[i].key == key)
        break;
    }
    // Backward shift: each later entry of the run moves into the hole unless its home lies
    // cyclically in (hole, its slot], where the hole would cut it off from its home.
    size_t hole = i;
    for (size_t j = next(i);; j = next(j)) {
      if (is_empty_(slots_[j].value))
        break;
      const size_t h = home(slots_[j].key);
      const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays)
        continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = slot{};
    --size_;
    return true;
  }

  /// Calls f(key, value&) for every entry, in slot order; f may change values but not make
  /// them empty (then call drop_empty()).
  template <class F>
  void for_each(F&& f) {
    for (auto& s : slots_)
      if (!is_empty_(s.value))
        f(s.key, s.value);
  }

  /// Rebuilds the table without the entries whose value for_each made empty.
  void drop_empty() { rehash(slots_.size()); }

 private:
  static constexpr size_t slots_min = 16;

  // Fibonacci hashing of the key's std::hash: block keys are hashes already, but test and
  // benchmark keys are small integers, and this spreads both.
  size_t home(const block_key& key) const {
    const uint64_t h = std::hash<block_key>{}(key);
    return static_cast<size_t>((h * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void grow() { rehash(slots_.empty() ? slots_min : slots_.size() * 2); }

  void rehash(size_t slots) {
    assert(std::has_single_bit(slots));
    std::vector<slot> old = std::move(slots_);
    slots_.assign(slots, slot{});
    shift_ = 64 - std::countr_zero(slots);
    size_ = 0;
    for (auto& s : old) {
      if (is_empty_(s.value))
        continue;
      size_t i = home(s.key);
      while (!is_empty_(slots_[i].value))
        i = next(i);
      slots_[i] = std::move(s);
      ++size_;
    }
  }

  std::vector<slot> slots_;
  unsigned shift_ = 64;
  size_t size_ = 0;
  [[no_unique_address]] IsEmpty is_empty_;
};

} // namespace crescent
