#include "messages/errors.hpp"
#include "storage/object_store.hpp"
#include "support/block_keys.hpp"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>

namespace crescent::storage {
namespace {

class objects : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::remove_all(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::unique_ptr<object_store> open(object_options options = {}) {
    auto s = object_store::open(dir, options);
    EXPECT_TRUE(s) << describe(s.error());
    return s ? std::move(*s) : nullptr;
  }

  static object_record block(uint64_t number, std::vector<uint32_t> nodes, int64_t deadline = 100) {
    object_record r;
    r.key = {0, number};
    r.size_bytes = 4096;
    r.put_deadline_ns = deadline;
    for (auto n : nodes)
      r.replicas.push_back({n, true, {n, 7, number * 4096, 4096, 99}, false});
    return r;
  }

  static std::vector<block_key> keys_of(const std::vector<object_record>& rs) {
    std::vector<block_key> out;
    for (auto& r : rs)
      out.push_back(r.key);
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir = (std::filesystem::temp_directory_path() /
                     ("crescent-objects-" + std::to_string(::getpid()) + "-" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                        .string();
};

TEST_F(objects, committed_blocks_and_their_replicas_survive_a_reopen) {
  {
    auto s = open();
    std::vector<object_record> recs{block(1, {0, 1}), block(2, {1}), block(3, {2})};
    ASSERT_FALSE(s->start(recs));
    EXPECT_EQ(s->pending_count(), 3u);
    auto keys = numbered_keys({1, 2});
    std::vector<uint64_t> sums{11, 22};
    ASSERT_FALSE(s->commit(keys, sums));
    ASSERT_FALSE(s->pin(2_key, true, 0));
  }
  auto s = open();
  EXPECT_EQ(s->complete_count(), 2u);
  EXPECT_EQ(s->pending_count(), 0u) << "a put in progress is not persisted";
  auto r = s->find(1_key);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->checksum, 11u);
  ASSERT_EQ(r->replicas.size(), 2u);
  EXPECT_EQ(r->replicas[1].node, 1u);
  EXPECT_EQ(r->replicas[1].dram.offset, 4096u);
  EXPECT_TRUE(s->find(2_key)->hard_pin) << "hard pins are persisted";
  EXPECT_EQ(s->find(3_key), nullptr);
}

TEST_F(objects, leases_and_pins_decide_what_may_be_evicted) {
  auto s = open();
  std::vector<object_record> recs{block(1, {0})};
  ASSERT_FALSE(s->start(recs));
  auto keys = numbered_keys({1});
  std::vector<uint64_t> sums{5};
  ASSERT_FALSE(s->commit(keys, sums));
  EXPECT_TRUE(s->evictable(*s->find(1_key), 1000));
  EXPECT_EQ(s->leased_count(1000), 0u);
  s->lease(1_key, 2000);
  EXPECT_FALSE(s->evictable(*s->find(1_key), 1000));
  EXPECT_TRUE(s->evictable(*s->find(1_key), 2000));
  EXPECT_EQ(s->leased_count(1999), 1u);
  EXPECT_EQ(s->leased_count(2000), 0u) << "a lease ends at its time";
  ASSERT_FALSE(s->pin(1_key, false, 3000));
  EXPECT_FALSE(s->evictable(*s->find(1_key), 2500)) << "soft pin";
  EXPECT_TRUE(s->evictable(*s->find(1_key), 3000)) << "soft pins expire";
  ASSERT_FALSE(s->pin(1_key, true, 0));
  EXPECT_FALSE(s->evictable(*s->find(1_key), 1u << 30));
  ASSERT_FALSE(s->unpin(1_key));
  EXPECT_TRUE(s->evictable(*s->find(1_key), 1u << 30));
  EXPECT_TRUE(is(s->pin(9_key, true, 0), errc::not_found));
}

TEST_F(objects, removal_waits_for_the_lease_and_pending_puts_are_reclaimed) {
  auto s = open();
  std::vector<object_record> recs{block(1, {0}), block(2, {0}), block(3, {0}, 500)};
  ASSERT_FALSE(s->start(recs));
  auto keys = numbered_keys({1, 2});
  std::vector<uint64_t> sums{1, 2};
  ASSERT_FALSE(s->commit(keys, sums));
  s->lease(1_key, 1000);
  auto gone = s->remove(keys, 100);
  ASSERT_TRUE(gone);
  EXPECT_EQ(keys_of(*gone), numbered_keys({2})) << "unleased: freed now";
  EXPECT_EQ(s->find(1_key)->state, object_state::removed);
  EXPECT_TRUE(keys_of(s->collect(400)).empty());
  EXPECT_EQ(keys_of(s->collect(500)), numbered_keys({3})) << "the put timed out";
  EXPECT_EQ(keys_of(s->collect(1000)), numbered_keys({1})) << "the lease ended";
  EXPECT_EQ(s->size(), 0u);
}

// collect() looks only at blocks still pending or removed: one committed, revoked or freed by
// another call is never returned again, and what is due comes in key order.
TEST_F(objects, collect_returns_only_blocks_still_pending_or_removed_in_key_order) {
  auto s = open();
  std::vector<object_record> recs{block(9, {0}, 100), block(4, {0}, 100), block(7, {0}, 100),
                                  block(5, {0}, 100), block(6, {0}, 100)};
  ASSERT_FALSE(s->start(recs));
  auto committed = numbered_keys({5, 6});
  std::vector<uint64_t> sums{5, 6};
  ASSERT_FALSE(s->commit(committed, sums));
  auto revoked = numbered_keys({7});
  EXPECT_EQ(keys_of(s->revoke(revoked)), revoked);
  auto removed = numbered_keys({6});
  s->lease(6_key, 100);
  ASSERT_TRUE(s->remove(removed, 50));
  EXPECT_EQ(keys_of(s->collect(200)), numbered_keys({4, 6, 9}));
  EXPECT_TRUE(keys_of(s->collect(1 << 30)).empty());
  EXPECT_EQ(s->size(), 1u) << "the committed block stays";
  EXPECT_EQ(s->find(5_key)->state, object_state::complete);
}

TEST_F(objects, a_dead_node_leaves_every_replica_list) {
  {
    auto s = open();
    std::vector<object_record> recs{block(1, {0, 1}), block(2, {1}), block(3, {1}, 1 << 30)};
    ASSERT_FALSE(s->start(recs));
    auto keys = numbered_keys({1, 2});
    std::vector<uint64_t> sums{1, 2};
    ASSERT_FALSE(s->commit(keys, sums));
    auto lost = s->drop_node(1);
    ASSERT_TRUE(lost);
    EXPECT_EQ(keys_of(*lost), numbered_keys({2, 3})) << "single-replica blocks are lost";
    ASSERT_EQ(s->find(1_key)->replicas.size(), 1u);
    EXPECT_EQ(s->find(1_key)->replicas[0].node, 0u);
  }
  auto s = open();
  ASSERT_NE(s->find(1_key), nullptr);
  EXPECT_EQ(s->find(1_key)->replicas.size(), 1u);
  EXPECT_EQ(s->find(2_key), nullptr);
}

TEST_F(objects, a_dead_node_can_keep_its_ssd_replicas) {
  {
    auto s = open();
    auto on_ssd = block(1, {1});
    on_ssd.replicas[0].on_ssd = true; // in DRAM and on SSD
    std::vector<object_record> recs{on_ssd, block(2, {1}), block(3, {0, 1})};
    ASSERT_FALSE(s->start(recs));
    auto keys = numbered_keys({1, 2, 3});
    std::vector<uint64_t> sums{1, 2, 3};
    ASSERT_FALSE(s->commit(keys, sums));
    auto lost = s->drop_node(1, true);
    ASSERT_TRUE(lost);
    EXPECT_EQ(keys_of(*lost), numbered_keys({2})) << "DRAM-only: gone with the process";
    ASSERT_EQ(s->find(1_key)->replicas.size(), 1u);
    EXPECT_TRUE(s->find(1_key)->replicas[0].on_ssd);
    EXPECT_FALSE(s->find(1_key)->replicas[0].in_dram) << "its DRAM copy died with the process";
    EXPECT_EQ(s->find(3_key)->replicas.size(), 1u);
  }
  auto s = open();
  ASSERT_NE(s->find(1_key), nullptr) << "the SSD replica is persisted";
  EXPECT_TRUE(s->find(1_key)->replicas[0].on_ssd);
  auto lost = s->drop_node(1);
  ASSERT_TRUE(lost);
  EXPECT_EQ(keys_of(*lost), numbered_keys({1})) << "and leaves when the wait is over";
}

TEST_F(objects, invalid_changes_are_refused_and_change_nothing) {
  auto s = open();
  std::vector<object_record> recs{block(1, {0})};
  ASSERT_FALSE(s->start(recs));
  EXPECT_TRUE(is(s->start(recs), errc::already_exists));
  std::vector<object_record> none{block(2, {})};
  EXPECT_TRUE(is(s->start(none), errc::invalid_argument));
  auto unknown = numbered_keys({7});
  std::vector<uint64_t> sum{1};
  EXPECT_TRUE(is(s->commit(unknown, sum), errc::not_found));
  auto twice = numbered_keys({1, 1});
  std::vector<uint64_t> sums{1, 1};
  EXPECT_TRUE(s->commit(twice, sums));
  EXPECT_EQ(s->pending_count(), 1u);
  std::vector<object_record> many(object_store::batch_max + 1);
  EXPECT_TRUE(is(s->start(many), errc::limit_exceeded));
  EXPECT_TRUE(is(s->set_replicas(1_key, {}).error(), errc::not_found)) << "pending";
  EXPECT_EQ(keys_of(s->revoke(numbered_keys({1}))), numbered_keys({1}));
}

TEST_F(objects, replicas_on_nodes_the_pool_does_not_have_are_dropped_on_reopen) {
  {
    auto s = open();
    std::vector<object_record> recs{block(1, {0, 5}), block(2, {6}), block(3, {1})};
    ASSERT_FALSE(s->start(recs));
    auto keys = numbered_keys({1, 2, 3});
    std::vector<uint64_t> sums{11, 22, 33};
    ASSERT_FALSE(s->commit(keys, sums));
  }
  object_options four;
  four.nodes = 4; // the pool restarted with four nodes: ids 5 and 6 are gone
  {
    auto s = open(four);
    const auto& l = s->loaded();
    EXPECT_EQ(l.blocks, 2u);
    EXPECT_EQ(l.dropped_blocks, 1u) << "block 2 had no replica left";
    EXPECT_EQ(l.dropped_replicas, 2u);
    EXPECT_NE(l.first_reason.find("node 5"), std::string::npos) << l.first_reason;
    ASSERT_NE(s->find(1_key), nullptr);
    ASSERT_EQ(s->find(1_key)->replicas.size(), 1u);
    EXPECT_EQ(s->find(1_key)->replicas[0].node, 0u);
    EXPECT_EQ(s->find(2_key), nullptr);
    EXPECT_EQ(s->find(3_key)->checksum, 33u);
  }
  auto s = open(four);
  EXPECT_EQ(s->loaded().dropped_blocks + s->loaded().dropped_replicas, 0u)
      << "what was dropped was deleted and the repair persisted";
  EXPECT_EQ(s->complete_count(), 2u);
  EXPECT_EQ(s->find(1_key)->replicas.size(), 1u);
}

TEST_F(objects, damaged_records_are_dropped_not_fatal) {
  {
    auto s = open();
    auto twice = block(2, {1});
    twice.replicas.push_back(twice.replicas[0]);
    auto foreign = block(3, {1});
    foreign.replicas[0].dram.node = 2; // a handle of another node
    std::vector<object_record> recs{block(1, {0}), twice, foreign};
    ASSERT_FALSE(s->start(recs));
    auto keys = numbered_keys({1, 2, 3});
    std::vector<uint64_t> sums{11, 22, 33};
    ASSERT_FALSE(s->commit(keys, sums));
  }
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options{}, dir, &raw).ok());
    std::unique_ptr<rocksdb::DB> db{raw};
    std::string key(17, '\0');
    key[0] = 'o';
    key[16] = 9; // block 9, big-endian
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions{}, key, "not a record").ok());
  }
  auto s = open();
  const auto& l = s->loaded();
  EXPECT_EQ(l.blocks, 2u);
  EXPECT_EQ(l.dropped_blocks, 2u) << "block 9 undecodable, block 3 left with no replica";
  EXPECT_EQ(l.dropped_replicas, 2u) << "block 2's second replica, block 3's";
  EXPECT_EQ(s->find(1_key)->checksum, 11u);
  ASSERT_NE(s->find(2_key), nullptr);
  EXPECT_EQ(s->find(2_key)->replicas.size(), 1u);
  EXPECT_EQ(s->find(3_key), nullptr);
  EXPECT_EQ(s->find(9_key), nullptr);
}

TEST(object_record, damaged_bytes_are_an_error) {
  object_record r;
  r.key = 5_key;
  r.replicas.push_back({1, true, {}, true});
  auto bytes = encode_object(r);
  auto back = decode_object(bytes);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->replicas[0].on_ssd);
  EXPECT_FALSE(decode_object(bytes.substr(0, 8)));
  EXPECT_FALSE(decode_object("xyz"));
}

// Records must sit under their own key: one under another block's key, or under the 9-byte
// database key of a 64-bit block key (the format before 128-bit keys), is dropped on open and
// counted, never served under a key nobody can ask for.
TEST_F(objects, records_under_another_key_or_a_64_bit_key_are_dropped) {
  {
    auto s = open();
    std::vector<object_record> recs{block(1, {0})};
    ASSERT_FALSE(s->start(recs));
    auto keys = numbered_keys({1});
    std::vector<uint64_t> sums{11};
    ASSERT_FALSE(s->commit(keys, sums));
  }
  auto record = block(2, {0});
  record.state = object_state::complete;
  auto file = [&](const std::string& db_key) {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options{}, dir, &raw).ok());
    std::unique_ptr<rocksdb::DB> db{raw};
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions{}, db_key, encode_object(record)).ok());
  };
  std::string old_key(9, '\0'); // 'o' and eight big-endian bytes: block 2, as once filed
  old_key[0] = 'o';
  old_key[8] = 2;
  file(old_key);
  {
    auto s = open();
    EXPECT_EQ(s->loaded().blocks, 1u);
    EXPECT_EQ(s->loaded().dropped_blocks, 1u);
    EXPECT_NE(s->loaded().first_reason.find("64-bit block key"), std::string::npos)
        << s->loaded().first_reason;
    EXPECT_EQ(s->find(2_key), nullptr);
  }
  std::string other(17, '\0'); // block 3's key, holding block 2's record
  other[0] = 'o';
  other[16] = 3;
  file(other);
  auto s = open();
  EXPECT_EQ(s->loaded().blocks, 1u);
  EXPECT_EQ(s->loaded().dropped_blocks, 1u) << "the old record went at the last open";
  EXPECT_NE(s->loaded().first_reason.find("another block's key"), std::string::npos)
      << s->loaded().first_reason;
  EXPECT_NE(s->find(1_key), nullptr);
  EXPECT_EQ(s->find(2_key), nullptr);
  EXPECT_EQ(s->find(3_key), nullptr);
}

} // namespace
} // namespace crescent::storage
