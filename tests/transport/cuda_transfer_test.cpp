// The cuda path in one process, on a real GPU (skipped with the reason elsewhere): GPU regions
// at offsets into allocations, host<->GPU and GPU<->GPU integrity, batches, refusals, and two
// engines of one process reaching each other's GPU regions.
#include "cuda_test_util.hpp"
#include "transport/host_memory.hpp"

#include <algorithm>

namespace crescent::transport {
namespace {

using test::device_buffer;
using test::random_bytes;

constexpr size_t arena_bytes = (64u << 20) + 8192;
constexpr auto gpu0 = memory_location::cuda(0);

struct gpu_fixture : ::testing::Test {
  std::shared_ptr<transfer_engine> engine = *transfer_engine::create_local(7);
  std::unique_ptr<device_buffer> arena;
  region_handle region; // all of the arena but its first 4099 bytes

  void SetUp() override {
    CRESCENT_SKIP_WITHOUT_CUDA(*engine);
    arena = std::make_unique<device_buffer>(arena_bytes);
    ASSERT_NE(arena->p, nullptr);
    auto h = engine->register_region(1, arena->p + 4099, arena_bytes - 4099, gpu0);
    ASSERT_TRUE(h) << describe(h.error());
    region = *h;
  }
};

TEST_F(gpu_fixture, registration_checks_the_memory) {
  EXPECT_EQ(engine->paths(1), (std::vector<std::string>{"cuda", "local"}));
  auto past = engine->register_region(1, arena->p + 8, arena_bytes, gpu0);
  ASSERT_FALSE(past);
  EXPECT_TRUE(is(past.error(), errc::invalid_argument)) << describe(past.error());
  std::vector<std::byte> host(4096);
  auto not_gpu = engine->register_region(1, host.data(), host.size(), gpu0);
  ASSERT_FALSE(not_gpu);
  EXPECT_TRUE(is(not_gpu.error(), errc::invalid_argument)) << describe(not_gpu.error());
  auto wrong = engine->register_region(1, arena->p, 4096, memory_location::cuda(1000));
  EXPECT_FALSE(wrong);
  auto again = engine->register_region(1, arena->p, 4096, gpu0); // overlapping is allowed
  ASSERT_TRUE(again) << describe(again.error());
  EXPECT_FALSE(engine->unregister_region(*again));
}

TEST_F(gpu_fixture, host_and_gpu_bytes_survive_both_directions) {
  uint64_t at = 3;
  for (uint64_t size : {1ull, 3ull, 4097ull, (1ull << 20) + 5, 17ull << 20, 64ull << 20}) {
    auto src = random_bytes(size, size);
    ASSERT_FALSE(engine->write(region, at, src));
    EXPECT_EQ(arena->download(4099 + at, size), src) << size;
    std::vector<std::byte> back(size);
    ASSERT_FALSE(engine->read(region, at, back));
    EXPECT_EQ(back, src) << size;
    at = (at * 7 + 1) % 4093;
  }
}

TEST_F(gpu_fixture, gpu_buffers_reach_host_and_gpu_regions) {
  host_memory host = std::move(*host_memory::allocate(1 << 20));
  auto host_region = *engine->register_region(1, host.data(), host.size_bytes());
  device_buffer local{1 << 20};
  auto src = random_bytes((1 << 20) - 11, 5);
  local.upload(0, src);
  // GPU buffer -> host region, then host region -> GPU region through a GPU buffer.
  transfer_op to_host{op_kind::write, {local.p, src.size()}, host_region, 11, false, gpu0};
  auto id = engine->submit(std::span{&to_host, 1}, clock_type::now() + std::chrono::seconds(10));
  ASSERT_EQ((*engine->wait(*id))[0].state, op_state::completed);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), host.data() + 11));
  transfer_op to_gpu{op_kind::write, {local.p, src.size()}, region, 101, false, gpu0};
  id = engine->submit(std::span{&to_gpu, 1}, clock_type::now() + std::chrono::seconds(10));
  ASSERT_EQ((*engine->wait(*id))[0].state, op_state::completed);
  EXPECT_EQ(arena->download(4099 + 101, src.size()), src);
  ASSERT_FALSE(engine->copy(region.slice(101, src.size()), host_region.slice(0, src.size())));
  EXPECT_TRUE(std::equal(src.begin(), src.end(), host.data()));
  EXPECT_FALSE(engine->unregister_region(host_region));
}

TEST_F(gpu_fixture, batches_mix_directions_and_sizes) {
  constexpr size_t ops_n = 64;
  std::vector<std::vector<std::byte>> bufs;
  std::vector<transfer_op> ops;
  for (size_t i = 0; i < ops_n; ++i) {
    bufs.push_back(random_bytes(1 + i * 4099, i));
    ops.push_back({op_kind::write, bufs.back(), region, i * (300u << 10) + i});
  }
  auto id = engine->submit(ops, clock_type::now() + std::chrono::seconds(30));
  auto results = *engine->wait(*id);
  for (const auto& r : results)
    ASSERT_EQ(r.state, op_state::completed) << describe(r.reason);
  std::vector<std::vector<std::byte>> back;
  for (size_t i = 0; i < ops_n; ++i) {
    back.emplace_back(bufs[i].size());
    ops[i] = {op_kind::read, back.back(), region, i * (300u << 10) + i};
  }
  id = engine->submit(ops, clock_type::now() + std::chrono::seconds(30));
  results = *engine->wait(*id);
  for (const auto& r : results)
    ASSERT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_EQ(back, bufs);
}

TEST_F(gpu_fixture, refusals_write_nothing) {
  ASSERT_EQ(cudaMemset(arena->p, 0x6b, arena_bytes), cudaSuccess);
  auto src = random_bytes(4096, 1);
  auto bad_key = region;
  bad_key.access_key ^= 1;
  EXPECT_TRUE(is(engine->write(bad_key, 0, src), errc::access_denied));
  EXPECT_TRUE(is(engine->write(region, region.length - 10, src), errc::out_of_range));
  auto beyond = region;
  beyond.length += 1;
  EXPECT_TRUE(is(engine->write(beyond, region.length - 4095, src), errc::out_of_range));
  transfer_op sum{op_kind::write, src, region, 0, true};
  auto id = engine->submit(std::span{&sum, 1}, clock_type::now() + std::chrono::seconds(5));
  EXPECT_TRUE(is((*engine->wait(*id))[0].reason, errc::invalid_argument));
  auto all = arena->download(0, arena_bytes);
  EXPECT_TRUE(std::all_of(all.begin(), all.end(), [](auto b) { return b == std::byte{0x6b}; }));
  ASSERT_FALSE(engine->unregister_region(region));
  EXPECT_TRUE(is(engine->write(region, 0, src), errc::not_found));
}

// Two engines of one process: the peer's GPU region is reached by its address (CUDA refuses
// to open a process's own IPC handles), its host region through its memfd segment.
TEST_F(gpu_fixture, a_peer_engine_in_this_process_reaches_gpu_regions) {
  auto owner = test::same_host_engine(2);
  device_buffer theirs{1 << 20};
  auto h = *owner->register_region(2, theirs.p + 1, (1 << 20) - 1, gpu0);
  auto user = test::same_host_engine(3);
  ASSERT_FALSE(user->add_peer(owner->self_info()));
  EXPECT_EQ(user->paths(2), (std::vector<std::string>{"cuda", "shm"}));
  auto src = random_bytes(300000, 9);
  ASSERT_FALSE(user->write(h, 17, src));
  EXPECT_EQ(theirs.download(18, src.size()), src);
  std::vector<std::byte> back(src.size());
  ASSERT_FALSE(user->read(h, 17, back));
  EXPECT_EQ(back, src);
  ASSERT_FALSE(owner->unregister_region(h));
  EXPECT_TRUE(is(user->read(h, 17, back), errc::not_found));
}

TEST_F(gpu_fixture, injected_slice_faults_fail_or_change_the_destination_on_the_cuda_path) {
  auto src = random_bytes(1 << 20, 3);
  auto run = [&](op_kind kind, std::span<std::byte> local) {
    transfer_op op{kind, local, region, 0, false};
    auto id = engine->submit(std::span{&op, 1}, clock_type::now() + std::chrono::seconds(10));
    EXPECT_TRUE(id);
    auto results = engine->wait(*id);
    EXPECT_TRUE(results);
    return results ? results->at(0) : op_result{};
  };
  ASSERT_FALSE(engine->write(region, 0, src));
  engine->set_fault_hook([](const slice_view&) { return slice_fault::fail; });
  auto other = random_bytes(src.size(), 4);
  auto r = run(op_kind::write, other);
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_NE(describe(r.reason).find("injected fault"), std::string::npos) << describe(r.reason);
  EXPECT_EQ(arena->download(4099, src.size()), src) << "a failed slice writes nothing";
  engine->set_fault_hook([](const slice_view&) { return slice_fault::corrupt; });
  std::vector<std::byte> back(src.size());
  r = run(op_kind::read, back);
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_NE(back, src) << "a read's bytes change once landed in host memory";
  EXPECT_EQ(arena->download(4099, src.size()), src) << "the GPU source does not";
  r = run(op_kind::write, src);
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_NE(arena->download(4099, src.size()), src) << "a write changes in GPU memory";
  EXPECT_EQ(src, random_bytes(1 << 20, 3)) << "the host source does not";
  engine->set_fault_hook({});
}

} // namespace
} // namespace crescent::transport
