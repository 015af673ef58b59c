#include "messages/errors.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace crescent::transport {
namespace {

struct engine_fixture : ::testing::Test {
  transfer_engine engine{42};
  host_memory memory = std::move(*host_memory::allocate(4096));
  region_handle region = *engine.register_region(3, memory.data(), memory.size_bytes());

  void fill(std::byte value) { std::fill_n(memory.data(), memory.size_bytes(), value); }
  bool untouched(std::byte value) const {
    return std::all_of(memory.data(), memory.data() + memory.size_bytes(),
                       [&](std::byte b) { return b == value; });
  }
};

TEST_F(engine_fixture, write_then_read_at_unaligned_offsets) {
  std::vector<std::byte> src(777), dst(777);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = std::byte(i * 31 + 7);
  auto part = region.slice(13, 1000);
  ASSERT_FALSE(engine.write(part, 5, src));
  ASSERT_FALSE(engine.read(part, 5, dst));
  EXPECT_EQ(src, dst);
  EXPECT_EQ(0, std::memcmp(memory.data() + 18, src.data(), src.size()));
  EXPECT_EQ(engine.metrics().bytes_written, 777u);
}

TEST_F(engine_fixture, copy_between_handles) {
  fill(std::byte{1});
  std::fill_n(memory.data(), 100, std::byte{9});
  ASSERT_FALSE(engine.copy(region.slice(0, 100), region.slice(1000, 100)));
  EXPECT_EQ(memory.data()[1099], std::byte{9});
  EXPECT_EQ(memory.data()[1100], std::byte{1});
}

TEST_F(engine_fixture, wrong_key_is_refused_and_writes_nothing) {
  fill(std::byte{0});
  auto forged = region;
  forged.access_key ^= 1;
  std::vector<std::byte> src(16, std::byte{5});
  auto err = engine.write(forged, 0, src);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  EXPECT_TRUE(untouched(std::byte{0}));
  EXPECT_EQ(engine.metrics().refused, 1u);
}

TEST_F(engine_fixture, out_of_range_is_refused_and_writes_nothing) {
  fill(std::byte{0});
  std::vector<std::byte> src(16, std::byte{5});
  auto part = region.slice(4000, 96);
  EXPECT_TRUE(is(engine.write(part, 90, src), errc::out_of_range));
  auto grown = part;
  grown.length = 200; // a handle claiming more than its region
  EXPECT_TRUE(is(engine.write(grown, 0, src), errc::out_of_range));
  auto overflow = region;
  overflow.offset = std::numeric_limits<uint64_t>::max() - 4;
  EXPECT_TRUE(is(engine.write(overflow, 0, src), errc::out_of_range));
  EXPECT_TRUE(
      is(engine.write(region, std::numeric_limits<uint64_t>::max(), src), errc::out_of_range));
  EXPECT_TRUE(untouched(std::byte{0}));
}

TEST_F(engine_fixture, unregistered_region_is_not_found) {
  auto copy = region;
  ASSERT_FALSE(engine.unregister_region(region));
  std::vector<std::byte> dst(8);
  EXPECT_TRUE(is(engine.read(copy, 0, dst), errc::not_found));
  EXPECT_TRUE(is(engine.unregister_region(copy), errc::not_found));
  region_handle bogus;
  EXPECT_TRUE(is(engine.read(bogus, 0, dst), errc::not_found));
}

TEST_F(engine_fixture, registration_rejects_bad_regions) {
  EXPECT_FALSE(engine.register_region(0, nullptr, 10));
  EXPECT_FALSE(engine.register_region(0, memory.data(), 0));
}

TEST_F(engine_fixture, keys_differ_between_regions) {
  auto other = engine.register_region(3, memory.data(), 10);
  ASSERT_TRUE(other);
  EXPECT_NE(other->access_key, region.access_key);
  EXPECT_NE(other->region_id, region.region_id);
}

TEST(host_memory, zero_size_is_an_error) {
  EXPECT_FALSE(host_memory::allocate(0));
}

} // namespace
} // namespace crescent::transport
