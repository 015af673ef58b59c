// xxHash's XXH3-64, inlined and compiled for AVX2 (see xxh3.hpp). This file is built with -mavx2:
// it must include nothing but xxhash.h, whose functions XXH_INLINE_ALL makes static, so that no
// AVX2 code can stand in for an inline function that other files share (a C++ header's
// templates or inline functions would be merged across files by the linker).
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

namespace crescent::detail {

unsigned long long xxh3_64_avx2(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

unsigned long long xxh3_64_seeded_avx2(const void* data, size_t size, unsigned long long seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

} // namespace crescent::detail
