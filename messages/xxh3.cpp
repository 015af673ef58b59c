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

using hash_fn = uint64_t (*)(const void*, size_t);

uint64_t baseline(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

#if defined(CRESCENT_XXH3_AVX2)
uint64_t avx2(const void* data, size_t size) {
  return detail::xxh3_64_avx2(data, size);
}
#endif

hash_fn choose() {
#if defined(CRESCENT_XXH3_AVX2)
  const char* forced = std::getenv("CRESCENT_XXH3");
  if (__builtin_cpu_supports("avx2") && (forced == nullptr || std::strcmp(forced, "baseline") != 0))
    return avx2;
#endif
  return baseline;
}

hash_fn chosen() {
  static const hash_fn fn = choose();
  return fn;
}

} // namespace

uint64_t xxh3_64(const void* data, size_t size) {
  return chosen()(data, size);
}

uint64_t xxh3_64_seeded(const void* data, size_t size, uint64_t seed) {
#if defined(CRESCENT_XXH3_AVX2)
  if (chosen() != baseline)
    return detail::xxh3_64_seeded_avx2(data, size, seed);
#endif
  return XXH3_64bits_withSeed(data, size, seed);
}

const char* xxh3_64_path() {
  return chosen() == baseline ? "baseline" : "avx2";
}

} // namespace crescent
