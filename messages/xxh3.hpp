// XXH3-64 of bulk bytes (KV blocks, transfer slices), with the widest vector unit this CPU has.
//
// The values are xxHash's own XXH3_64bits, bit for bit: XXH3 is defined independently of the
// vector width, and tests/messages/xxh3_test.cpp checks the two against each other. What
// differs is speed: Debian's libxxhash is built for the x86-64 baseline (SSE2), about 18 GB/s
// here, while the same code compiled for AVX2 runs at about 44 GB/s, as fast as a memcpy. A
// checked copy hashes its bytes twice and a pool put or get a third time, so at the pool's rates
// the library's hashing took more CPU than the copies (docs/benchmarks.md, "KV pool").
//
// The AVX2 build lives in its own translation unit (xxh3_avx2.cpp, the only one compiled with
// -mavx2, holding nothing but xxHash's static inline code) and is chosen once, at the first
// call, only where the CPU reports AVX2; elsewhere the library's function runs. The environment
// variable CRESCENT_XXH3=baseline makes a process run the library's build, to compare the two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace crescent {

/// XXH3_64bits(data, size), on the fastest path this CPU has.
uint64_t xxh3_64(const void* data, size_t size);

inline uint64_t xxh3_64(std::span<const std::byte> bytes) {
  return xxh3_64(bytes.data(), bytes.size());
}

/// XXH3_64bits_withSeed(data, size, seed), likewise.
uint64_t xxh3_64_seeded(const void* data, size_t size, uint64_t seed);

/// Which build xxh3_64 runs: "avx2" or "baseline" (for `crescent info`).
const char* xxh3_64_path();

} // namespace crescent
