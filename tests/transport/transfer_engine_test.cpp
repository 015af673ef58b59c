// The transfer engine inside one process: regions, refusals, batches, deadlines, cancellation.
#include "messages/errors.hpp"
#include "transport/host_memory.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <vector>

namespace crescent::transport {
namespace {

struct engine_fixture : ::testing::Test {
  std::shared_ptr<transfer_engine> engine = *transfer_engine::create_local(42);
  host_memory memory = std::move(*host_memory::allocate(4096));
  region_handle region = *engine->register_region(3, memory.data(), memory.size_bytes());

  void fill(std::byte value) { std::fill_n(memory.data(), memory.size_bytes(), value); }
  bool untouched(std::byte value) const {
    return std::all_of(memory.data(), memory.data() + memory.size_bytes(),
                       [&](std::byte b) { return b == value; });
  }
  uint64_t total(uint64_t path_metrics::*field) const {
    uint64_t sum = 0;
    for (const auto& m : engine->metrics())
      sum += m.*field;
    return sum;
  }
};

TEST_F(engine_fixture, write_then_read_at_unaligned_offsets) {
  std::vector<std::byte> src(777), dst(777);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = std::byte(i * 31 + 7);
  auto part = region.slice(13, 1000);
  ASSERT_FALSE(engine->write(part, 5, src));
  ASSERT_FALSE(engine->read(part, 5, dst));
  EXPECT_EQ(src, dst);
  EXPECT_EQ(0, std::memcmp(memory.data() + 18, src.data(), src.size()));
  EXPECT_EQ(total(&path_metrics::bytes_written), 777u);
  EXPECT_EQ(total(&path_metrics::bytes_read), 777u);
}

TEST_F(engine_fixture, copy_between_handles) {
  fill(std::byte{1});
  std::fill_n(memory.data(), 100, std::byte{9});
  ASSERT_FALSE(engine->copy(region.slice(0, 100), region.slice(1000, 100)));
  EXPECT_EQ(memory.data()[1099], std::byte{9});
  EXPECT_EQ(memory.data()[1100], std::byte{1});
}

TEST_F(engine_fixture, wrong_key_is_refused_and_writes_nothing) {
  fill(std::byte{0});
  auto forged = region;
  forged.access_key ^= 1;
  std::vector<std::byte> src(16, std::byte{5});
  auto err = engine->write(forged, 0, src);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  EXPECT_TRUE(untouched(std::byte{0}));
  EXPECT_EQ(total(&path_metrics::failures), 1u);
}

TEST_F(engine_fixture, out_of_range_is_refused_and_writes_nothing) {
  fill(std::byte{0});
  std::vector<std::byte> src(16, std::byte{5});
  auto part = region.slice(4000, 96);
  EXPECT_TRUE(is(engine->write(part, 90, src), errc::out_of_range));
  auto grown = part;
  grown.length = 200; // a handle claiming more than its region
  EXPECT_TRUE(is(engine->write(grown, 0, src), errc::out_of_range));
  auto overflow = region;
  overflow.offset = std::numeric_limits<uint64_t>::max() - 4;
  EXPECT_TRUE(is(engine->write(overflow, 0, src), errc::out_of_range));
  EXPECT_TRUE(
      is(engine->write(region, std::numeric_limits<uint64_t>::max(), src), errc::out_of_range));
  EXPECT_TRUE(untouched(std::byte{0}));
}

TEST_F(engine_fixture, unregistered_region_is_not_found) {
  auto copy = region;
  ASSERT_FALSE(engine->unregister_region(region));
  std::vector<std::byte> dst(8);
  EXPECT_TRUE(is(engine->read(copy, 0, dst), errc::not_found));
  EXPECT_TRUE(is(engine->unregister_region(copy), errc::not_found));
  region_handle bogus{3, 12345, 0, 8, 1};
  EXPECT_TRUE(is(engine->read(bogus, 0, dst), errc::not_found));
  // A new region in the same table slot does not revive the old handle.
  auto again = engine->register_region(3, memory.data(), memory.size_bytes());
  ASSERT_TRUE(again);
  EXPECT_NE(again->region_id, copy.region_id);
  EXPECT_TRUE(is(engine->read(copy, 0, dst), errc::not_found));
}

TEST_F(engine_fixture, registration_rejects_bad_regions) {
  EXPECT_FALSE(engine->register_region(0, nullptr, 10));
  EXPECT_FALSE(engine->register_region(0, memory.data(), 0));
}

TEST_F(engine_fixture, keys_differ_between_regions) {
  auto other = engine->register_region(3, memory.data(), 10);
  ASSERT_TRUE(other);
  EXPECT_NE(other->access_key, region.access_key);
  EXPECT_NE(other->region_id, region.region_id);
}

TEST_F(engine_fixture, a_batch_reports_each_operation) {
  fill(std::byte{0});
  std::vector<std::byte> a(100, std::byte{1}), b(50), c(10), empty;
  auto forged = region;
  forged.access_key += 1;
  std::vector<transfer_op> ops{{op_kind::write, a, region, 0},
                               {op_kind::read, b, region, 25},
                               {op_kind::write, c, forged, 0},
                               {op_kind::write, c, region, 4090},
                               {op_kind::read, empty, region, 0}};
  auto id = engine->submit(ops, clock_type::now() + std::chrono::seconds(5));
  ASSERT_TRUE(id);
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  ASSERT_EQ(results->size(), 5u);
  EXPECT_EQ((*results)[0].state, op_state::completed);
  EXPECT_EQ((*results)[1].state, op_state::completed);
  EXPECT_EQ(b[0], std::byte{1});
  EXPECT_EQ(b[49], std::byte{1}) << "bytes 25..74 of what op 0 wrote";
  EXPECT_EQ((*results)[2].state, op_state::failed);
  EXPECT_TRUE(is((*results)[2].reason, errc::access_denied));
  EXPECT_EQ((*results)[3].state, op_state::failed);
  EXPECT_TRUE(is((*results)[3].reason, errc::out_of_range));
  EXPECT_EQ((*results)[4].state, op_state::completed) << "nothing to move";
  EXPECT_FALSE(engine->wait(*id)) << "a waited batch is forgotten";
}

TEST_F(engine_fixture, a_past_deadline_times_out_and_moves_nothing) {
  fill(std::byte{0});
  std::vector<std::byte> src(64, std::byte{7});
  std::vector<transfer_op> ops{{op_kind::write, src, region, 0}};
  auto id = engine->submit(ops, clock_type::now() - std::chrono::milliseconds(1));
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0].state, op_state::timed_out);
  EXPECT_TRUE(untouched(std::byte{0}));
}

TEST_F(engine_fixture, unknown_nodes_have_no_route) {
  auto remote_engine = transfer_engine::create([] {
    transfer_options o;
    o.local_nodes = {1};
    o.enable_tcp = false;
    return o;
  }());
  ASSERT_TRUE(remote_engine);
  std::vector<std::byte> dst(8);
  region_handle elsewhere{9, 1, 0, 8, 1};
  auto err = (*remote_engine)->read(elsewhere, 0, dst);
  EXPECT_TRUE(is(err, errc::not_found)) << describe(err);
  EXPECT_NE(describe(err).find("no route to node 9"), std::string::npos);
}

TEST_F(engine_fixture, callbacks_report_the_whole_batch) {
  std::vector<std::byte> src(300, std::byte{3});
  std::vector<transfer_op> ops{{op_kind::write, src, region, 0},
                               {op_kind::write, src, region, 300}};
  std::promise<std::vector<op_result>> done;
  ASSERT_FALSE(engine->submit(ops, clock_type::now() + std::chrono::seconds(5),
                              [&](std::vector<op_result> r) { done.set_value(std::move(r)); }));
  auto results = done.get_future().get();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].state, op_state::completed);
  EXPECT_EQ(memory.data()[599], std::byte{3});
}

TEST_F(engine_fixture, oversized_batches_are_refused) {
  std::vector<transfer_op> ops(batch_ops_max + 1);
  EXPECT_FALSE(engine->submit(ops, clock_type::now()));
}

TEST(host_memory, zero_size_is_an_error) {
  EXPECT_FALSE(host_memory::allocate(0));
}

TEST(host_memory, is_backed_by_a_shareable_file) {
  auto m = host_memory::allocate(10000);
  ASSERT_TRUE(m);
  EXPECT_GE(m->fd(), 0);
  EXPECT_NE(m->segment_id(), 0u);
  EXPECT_EQ(m->size_bytes(), 10000u);
  // Sealed: other processes map it, and a file that shrank would fault their copies.
  EXPECT_NE(ftruncate(m->fd(), 4096), 0);
  EXPECT_NE(ftruncate(m->fd(), 1 << 20), 0);
}

TEST(transfer_options, tcp_connections_are_chosen_by_default_and_bounded) {
  transfer_options o;
  o.local_nodes = {1};
  EXPECT_EQ(o.tcp_connections_per_peer, 0u); // the default: the engine chooses
  EXPECT_TRUE(transfer_engine::create(o));
  o.tcp_connections_per_peer = 65;
  auto refused = transfer_engine::create(o);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is(refused.error(), errc::invalid_argument)) << describe(refused.error());
}

// Every bounded option refuses a value just outside its bounds, and names the option.
TEST(transfer_options, values_outside_their_bounds_are_refused) {
  using namespace std::chrono_literals;
  const std::vector<std::pair<std::string, std::function<void(transfer_options&)>>> bad = {
      {"slice sizes", [](auto& o) { o.slice_bytes = 0; }},
      {"slice sizes", [](auto& o) { o.tcp_slice_bytes = slice_bytes_max + 1; }},
      {"slice sizes", [](auto& o) { o.copy_slice_bytes = 0; }},
      {"silence limit", [](auto& o) { o.tcp_peer_silence_max = 9ms; }},
      {"silence limit", [](auto& o) { o.tcp_peer_silence_max = 11min; }},
      {"connect timeout", [](auto& o) { o.connect_timeout = 0ms; }},
      {"connect timeout", [](auto& o) { o.connect_timeout = 11min; }},
      {"slice attempts", [](auto& o) { o.slice_attempts_max = 0; }},
      {"slice attempts", [](auto& o) { o.slice_attempts_max = 17; }},
  };
  for (const auto& [name, spoil] : bad) {
    transfer_options o;
    o.local_nodes = {1};
    spoil(o);
    auto refused = transfer_engine::create(o);
    ASSERT_FALSE(refused) << name;
    EXPECT_TRUE(is(refused.error(), errc::invalid_argument)) << describe(refused.error());
    EXPECT_NE(describe(refused.error()).find(name), std::string::npos) << describe(refused.error());
  }
}

// A region outside shared memory (a plain vector) cannot go over the shm path, which gives the
// operation to TCP; with no server answering there either, the failure names both reasons.
TEST(transfer_engine, a_failure_after_giving_way_names_both_paths_reasons) {
  transfer_options o;
  o.local_nodes = {1};
  o.enable_rdma = false;
  auto owner = *transfer_engine::create(o);
  std::vector<std::byte> plain(4096);
  auto region = owner->register_region(1, plain.data(), plain.size());
  ASSERT_TRUE(region);
  o.local_nodes = {2};
  o.connect_timeout = std::chrono::milliseconds(500);
  auto initiator = *transfer_engine::create(o);
  auto info = owner->self_info();
  auto closed = tcp::listen_on("127.0.0.1", 0); // a port nothing listens on once it is closed
  ASSERT_TRUE(closed);
  close(closed->first);
  info.tcp_port = closed->second;
  ASSERT_FALSE(initiator->add_peer(info));
  std::vector<std::byte> out(4096);
  auto err = initiator->read(*region, 0, out);
  ASSERT_TRUE(err);
  const auto text = describe(err);
  EXPECT_NE(text.find("tcp: "), std::string::npos) << text;
  EXPECT_NE(text.find("before it, shm: "), std::string::npos) << text;
  EXPECT_NE(text.find("not shared host memory"), std::string::npos) << text;
}

} // namespace
} // namespace crescent::transport
