#include "messages/xxh3.hpp"

#include <xxhash.h>

#include <cstdlib>
#include <cstring>

namespace crescent {

#if defined(CRESCENT_XXH3_AVX2)
namespace detail {
// xxh3_avx2.cpp
unsigned long long xxh3_64_avx2(const void* data, size_t size);
unsigned long long xxh3_64_seeded_avx2(const void* data, size_t size, unsigned long long seed);
} // namespace detail
#endif

namespace {

// One build of XXH3, both of its entry points.
struct build {
  uint64_t (*hash)(const void*, size_t);
  uint64_t (*seeded)(const void*, size_t, uint64_t);
  const char* name;
};

constexpr build library{[](const void* p, size_t n) -> uint64_t { return XXH3_64bits(p, n); },
                        [](const void* p, size_t n, uint64_t seed) -> uint64_t {
                          return XXH3_64bits_withSeed(p, n, seed);
                        },
                        "baseline"};

#if defined(CRESCENT_XXH3_AVX2)
constexpr build avx2{[](const void* p, size_t n) -> uint64_t { return detail::xxh3_64_avx2(p, n); },
                     [](const void* p, size_t n, uint64_t seed) -> uint64_t {
                       return detail::xxh3_64_seeded_avx2(p, n, seed);
                     },
                     "avx2"};
#endif

const build& choose() {
#if defined(CRESCENT_XXH3_AVX2)
  const char* forced = std::getenv("CRESCENT_XXH3");
  if (__builtin_cpu_supports("avx2") && (forced == nullptr || std::strcmp(forced, "baseline") != 0))
    return avx2;
#endif
  return library;
}

const build& chosen() {
  static const build& b = choose();
  return b;
}

} // namespace

uint64_t xxh3_64(const void* data, size_t size) {
  return chosen().hash(data, size);
}

uint64_t xxh3_64_seeded(const void* data, size_t size, uint64_t seed) {
  return chosen().seeded(data, size, seed);
}

const char* xxh3_64_path() {
  return chosen().name;
}

} // namespace crescent
