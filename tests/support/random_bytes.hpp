// Reproducible test data: the same seed gives the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace crescent::testing {

inline void fill_random(std::byte* out, size_t n, uint64_t seed) {
  std::mt19937_64 rng{seed};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out + i, &v, 8);
  }
  for (; i < n; ++i)
    out[i] = std::byte(rng());
}

inline std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::vector<std::byte> out(n);
  fill_random(out.data(), n, seed);
  return out;
}

} // namespace crescent::testing
