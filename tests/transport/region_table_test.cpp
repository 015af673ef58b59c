// The region table as other processes on the host read it: a slot its owner left mid-update
// (the owner died between the two sequence-number stores) makes readers give up with a reason
// after a bounded wait, instead of spinning for ever.
#include "messages/errors.hpp"
#include "transport/region_table.hpp"
#include "transport/region_table_layout.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;

// The owner's table mapped writable a second time, to play an owner that stopped mid-write.
class owner_view {
 public:
  explicit owner_view(const region_table& t) : bytes_(t.size_bytes()) {
    map_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, t.fd(), 0);
  }
  ~owner_view() {
    if (ok())
      munmap(map_, bytes_);
  }
  bool ok() const { return map_ != MAP_FAILED; }

  detail::table_slot& slot_of(const region_handle& h) {
    auto* slots = reinterpret_cast<detail::table_slot*>(static_cast<char*>(map_) +
                                                        sizeof(detail::table_header));
    return slots[h.region_id & (region_table::capacity_max - 1)];
  }

 private:
  void* map_ = MAP_FAILED;
  size_t bytes_ = 0;
};

TEST(region_table, a_slot_left_mid_update_is_unavailable_after_a_bounded_wait) {
  auto created = region_table::create(16);
  ASSERT_TRUE(created) << describe(created.error());
  auto table = std::move(*created);
  std::vector<std::byte> memory(4096);
  auto h = table->insert(1, memory.data(), memory.size(), 99);
  ASSERT_TRUE(h) << describe(h.error());
  auto reader = remote_region_table::open(getpid(), table->fd(), table->size_bytes());
  ASSERT_TRUE(reader) << describe(reader.error());
  ASSERT_TRUE((*reader)->lookup(*h, 0, 16));

  owner_view owner{*table};
  ASSERT_TRUE(owner.ok()) << "cannot map the table writable";
  auto& seq = owner.slot_of(*h).seq;
  const uint64_t published = seq.load();
  ASSERT_EQ(published % 2, 0u);
  seq.store(published + 1); // the first store of a write, and never the second
  const auto start = std::chrono::steady_clock::now();
  auto e = (*reader)->lookup(*h, 0, 16);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(e);
  EXPECT_TRUE(is(e.error(), errc::unavailable)) << describe(e.error());
  EXPECT_NE(describe(e.error()).find("mid-update"), std::string::npos) << describe(e.error());
  EXPECT_LT(waited, 10s); // about 100 ms; a hang is the failure this test is about

  seq.store(published + 2); // a write that did finish: readers see the slot again
  auto again = (*reader)->lookup(*h, 0, 16);
  ASSERT_TRUE(again) << describe(again.error());
  EXPECT_EQ(again->access_key, 99u);
}

// The size of a peer's table comes in its message: one larger than the file would map pages
// that fault when read, so it is refused.
TEST(region_table, a_peer_table_smaller_than_advertised_is_refused) {
  auto created = region_table::create(16);
  ASSERT_TRUE(created) << describe(created.error());
  const auto& table = *created;
  auto larger = remote_region_table::open(getpid(), table->fd(), table->size_bytes() + 4096);
  ASSERT_FALSE(larger);
  EXPECT_TRUE(is(larger.error(), errc::unavailable)) << describe(larger.error());
  EXPECT_NE(describe(larger.error()).find("smaller than"), std::string::npos)
      << describe(larger.error());
  EXPECT_FALSE(remote_region_table::open(getpid(), table->fd(), 0));
  EXPECT_TRUE(remote_region_table::open(getpid(), table->fd(), table->size_bytes()));
}

// A table file that could shrink under a reader's mapping (not sealed) is refused, however
// well-formed: a later truncation would fault the reader.
TEST(region_table, a_peer_table_that_could_shrink_is_refused) {
  const size_t bytes = sizeof(detail::table_header) + 16 * sizeof(detail::table_slot);
  int fd = memfd_create("unsealed-table", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  auto* header = static_cast<detail::table_header*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(static_cast<void*>(header), MAP_FAILED);
  header->version_capacity.store((uint64_t{detail::table_version} << 32) | 16);
  header->magic.store(detail::table_magic);
  munmap(header, bytes);
  auto opened = remote_region_table::open(getpid(), fd, bytes);
  close(fd);
  ASSERT_FALSE(opened);
  EXPECT_NE(describe(opened.error()).find("not sealed against shrinking"), std::string::npos)
      << describe(opened.error());
  // The engine's own tables are sealed, and open.
  auto table = region_table::create(16);
  ASSERT_TRUE(table) << describe(table.error());
  EXPECT_TRUE(remote_region_table::open(getpid(), (*table)->fd(), (*table)->size_bytes()));
  EXPECT_NE(ftruncate((*table)->fd(), 64), 0) << "the table's file shrank";
}

} // namespace
} // namespace crescent::transport
