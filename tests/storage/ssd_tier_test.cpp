#include "messages/errors.hpp"
#include "storage/checksum.hpp"
#include "storage/ssd_tier.hpp"
#include "support/block_keys.hpp"
#include "support/random_bytes.hpp"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>

namespace crescent::storage {
namespace {

std::vector<std::byte> random_block(size_t n, uint64_t seed) {
  return testing::random_bytes(n, seed);
}

class ssd : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir = (std::filesystem::temp_directory_path() /
           ("crescent-ssd-" + std::to_string(::getpid()) + "-" + name))
              .string();
    std::filesystem::remove_all(dir);
    options.directory = dir;
    options.capacity_bytes = 8u << 20;
    options.use_io_uring = GetParam();
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::unique_ptr<ssd_tier> open() {
    auto t = ssd_tier::open(options);
    EXPECT_TRUE(t) << describe(t.error());
    return t ? std::move(*t) : nullptr;
  }

  std::string dir;
  ssd_options options;
};

TEST_P(ssd, blocks_read_back_identical_and_survive_a_reopen) {
  std::vector<std::vector<std::byte>> data;
  {
    auto t = open();
    ASSERT_TRUE(t);
    EXPECT_STREQ(t->io_engine(), GetParam() ? "io_uring" : "pread/pwrite");
    for (uint64_t k = 0; k < 10; ++k) {
      data.push_back(random_block(1000 + k * 5000, k));
      ASSERT_FALSE(t->put(block_key{0, k}, data.back(), block_checksum(data.back())));
    }
    ASSERT_FALSE(t->remove(3_key));
    EXPECT_TRUE(is(t->put(1_key, data[1], 0), errc::already_exists));
  }
  auto t = open();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->blocks().size(), 9u);
  for (uint64_t k = 0; k < 10; ++k) {
    std::vector<std::byte> back(data[k].size());
    auto err = t->get(block_key{0, k}, back);
    if (k == 3) {
      EXPECT_TRUE(is(err, errc::not_found));
      continue;
    }
    ASSERT_FALSE(err) << describe(err);
    EXPECT_EQ(back, data[k]);
  }
  // Space of the reopened tier is what the index says: new blocks do not overwrite old ones.
  auto more = random_block(3u << 20, 99);
  ASSERT_FALSE(t->put(100_key, more, block_checksum(more)));
  std::vector<std::byte> back(data[9].size());
  ASSERT_FALSE(t->get(9_key, back));
  EXPECT_EQ(back, data[9]);
}

TEST_P(ssd, a_damaged_block_is_a_checksum_mismatch) {
  auto t = open();
  auto block = random_block(8192, 1);
  ASSERT_FALSE(t->put(7_key, block, block_checksum(block)));
  {
    std::fstream f{dir + "/blocks.data", std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(static_cast<std::streamoff>(t->find(7_key)->offset + 100));
    f.put('\x42');
  }
  std::vector<std::byte> back(block.size());
  EXPECT_TRUE(is(t->get(7_key, back), errc::checksum_mismatch));
}

TEST_P(ssd, a_full_tier_and_a_full_disk_are_explicit_errors) {
  auto t = open();
  auto big = random_block(6u << 20, 2);
  ASSERT_FALSE(t->put(1_key, big, block_checksum(big)));
  EXPECT_TRUE(is(t->put(2_key, big, block_checksum(big)), errc::no_space)) << "capacity";
  EXPECT_EQ(t->blocks().size(), 1u);
  // A file size limit makes the kernel refuse the write as a full disk would.
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small{1u << 20, old.rlim_max};
  setrlimit(RLIMIT_FSIZE, &small);
  auto block = random_block(1u << 20, 3);
  auto err = t->put(3_key, block, block_checksum(block));
  setrlimit(RLIMIT_FSIZE, &old);
  EXPECT_TRUE(is(err, errc::no_space)) << describe(err);
  EXPECT_FALSE(t->find(3_key)) << "nothing recorded";
  std::vector<std::byte> back(big.size());
  EXPECT_FALSE(t->get(1_key, back)) << "what was stored is still there";
  EXPECT_EQ(back, big);
}

TEST_P(ssd, bad_options_are_refused) {
  options.unit_bytes = 1000;
  EXPECT_FALSE(ssd_tier::open(options));
  options.unit_bytes = 4096;
  options.directory = "";
  EXPECT_FALSE(ssd_tier::open(options));
}

// An index written before 128-bit block keys files each block under 'k' and eight bytes: its
// blocks cannot be named now, and opening it says so instead of serving them under other keys.
TEST_P(ssd, an_index_of_64_bit_keys_is_refused_with_the_reason) {
  {
    auto t = open();
    ASSERT_TRUE(t);
  }
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options{}, dir + "/index", &raw).ok());
    std::unique_ptr<rocksdb::DB> db{raw};
    std::string old_key(9, '\0');
    old_key[0] = 'k';
    old_key[8] = 1;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions{}, old_key, std::string(25, '\0')).ok());
  }
  auto t = ssd_tier::open(options);
  ASSERT_FALSE(t);
  EXPECT_TRUE(is(t.error(), errc::io_error));
  EXPECT_NE(describe(t.error()).find("64-bit block keys"), std::string::npos)
      << describe(t.error());
}

INSTANTIATE_TEST_SUITE_P(io, ssd, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "io_uring" : "pread"; });

} // namespace
} // namespace crescent::storage
