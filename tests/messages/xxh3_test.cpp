// The vector build of XXH3 gives the library's values: every length from 0 to 4 KiB (each of
// XXH3's size classes and their edges), long inputs up to 2 MiB, and misaligned starts.
#include "messages/xxh3.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace crescent::testing {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::vector<std::byte> out(n);
  std::mt19937_64 rng{seed};
  for (auto& b : out)
    b = static_cast<std::byte>(rng());
  return out;
}

TEST(xxh3, every_short_length_hashes_as_the_library_does) {
  const auto bytes = random_bytes(4096 + 64, 1);
  for (size_t n = 0; n <= 4096; ++n)
    ASSERT_EQ(xxh3_64(bytes.data(), n), XXH3_64bits(bytes.data(), n)) << n << " bytes";
}

TEST(xxh3, long_and_misaligned_inputs_hash_as_the_library_does) {
  const auto bytes = random_bytes((2u << 20) + 64, 2);
  for (size_t n : {size_t{4097}, size_t{65536}, size_t{65537}, size_t{512} << 10,
                   (size_t{512} << 10) + 13, size_t{2} << 20})
    for (size_t at = 0; at < 8; ++at)
      ASSERT_EQ(xxh3_64(bytes.data() + at, n), XXH3_64bits(bytes.data() + at, n))
          << n << " bytes at offset " << at;
}

TEST(xxh3, seeded_hashes_are_the_librarys) {
  const auto bytes = random_bytes((512u << 10) + 8, 4);
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{0x9e3779b97f4a7c15}})
    for (size_t n : {size_t{0}, size_t{17}, size_t{200}, size_t{4096}, size_t{512} << 10})
      ASSERT_EQ(xxh3_64_seeded(bytes.data() + 3, n, seed),
                XXH3_64bits_withSeed(bytes.data() + 3, n, seed))
          << n << " bytes, seed " << seed;
}

TEST(xxh3, a_changed_byte_changes_the_hash) {
  auto bytes = random_bytes(512 << 10, 3);
  const uint64_t before = xxh3_64(std::span<const std::byte>{bytes});
  bytes[300'000] ^= std::byte{1};
  EXPECT_NE(xxh3_64(std::span<const std::byte>{bytes}), before);
}

TEST(xxh3, names_the_path_it_runs) {
  const std::string path = xxh3_64_path();
  EXPECT_TRUE(path == "avx2" || path == "baseline") << path;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    EXPECT_EQ(path, "avx2") << "this CPU has AVX2: the vector build should run";
  }
#endif
}

} // namespace
} // namespace crescent::testing
