// A set of a cluster's node ids (below cluster_nodes_max), as a few 64-bit words: which nodes
// hold a block's replicas, in the conductor's prefix index and in prefill reports.
#pragma once

#include <array>
#include <bit>
#include <cassert>
#include <cstdint>
#include <span>

namespace crescent {

class node_set {
 public:
  static constexpr uint32_t words = 4;
  static constexpr uint32_t capacity = 64 * words; // node ids [0, 256)

  static node_set all() {
    node_set s;
    s.words_.fill(~uint64_t{0});
    return s;
  }

  /// From words written by to_words (words of them); ids past capacity cannot be set.
  static node_set from_words(std::span<const uint64_t, words> in) {
    node_set s;
    for (uint32_t w = 0; w < words; ++w)
      s.words_[w] = in[w];
    return s;
  }
  const std::array<uint64_t, words>& to_words() const { return words_; }

  void insert(uint32_t node) {
    assert(node < capacity);
    words_[node / 64] |= uint64_t{1} << (node % 64);
  }
  void erase(uint32_t node) {
    assert(node < capacity);
    words_[node / 64] &= ~(uint64_t{1} << (node % 64));
  }
  bool contains(uint32_t node) const {
    return node < capacity && (words_[node / 64] >> (node % 64) & 1) != 0;
  }
  bool empty() const {
    uint64_t any = 0;
    for (auto w : words_)
      any |= w;
    return any == 0;
  }

  uint32_t size() const {
    uint32_t n = 0;
    for (auto w : words_)
      n += static_cast<uint32_t>(std::popcount(w));
    return n;
  }

  node_set& operator|=(const node_set& other) {
    for (uint32_t w = 0; w < words; ++w)
      words_[w] |= other.words_[w];
    return *this;
  }
  node_set& operator&=(const node_set& other) {
    for (uint32_t w = 0; w < words; ++w)
      words_[w] &= other.words_[w];
    return *this;
  }
  /// The nodes of this set that are not in `other`.
  node_set without(const node_set& other) const {
    node_set out;
    for (uint32_t w = 0; w < words; ++w)
      out.words_[w] = words_[w] & ~other.words_[w];
    return out;
  }

  /// Calls f(node) for each node in the set, in ascending order.
  template <class F>
  void for_each(F&& f) const {
    for (uint32_t w = 0; w < words; ++w)
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        f(w * 64 + static_cast<uint32_t>(std::countr_zero(bits)));
  }

  bool operator==(const node_set&) const = default;

 private:
  std::array<uint64_t, words> words_{};
};

} // namespace crescent
