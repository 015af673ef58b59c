// Hand-made block keys for tests: `7_key` is {0, 7}. Real keys are SHA-256 outputs
// (storage/block_key.hpp); a test that needs no particular prompt names blocks by small numbers.
#pragma once

#include "messages/block_key.hpp"

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <vector>

namespace crescent {

constexpr block_key operator""_key(unsigned long long n) {
  return {0, static_cast<uint64_t>(n)};
}

/// Keys {0, n} for each n.
inline std::vector<block_key> numbered_keys(std::span<const uint64_t> numbers) {
  std::vector<block_key> out;
  out.reserve(numbers.size());
  for (auto n : numbers)
    out.push_back({0, n});
  return out;
}

/// `numbered_keys({1, 2, 3})`.
inline std::vector<block_key> numbered_keys(std::initializer_list<uint64_t> numbers) {
  return numbered_keys(std::span{numbers.begin(), numbers.size()});
}

// GoogleTest prints keys in failure messages through this.
inline void PrintTo(const block_key& key, std::ostream* os) {
  *os << to_string(key);
}

} // namespace crescent
