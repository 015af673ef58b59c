// The cuda path's parts that run everywhere: memory locations, the region table's GPU entries,
// and the refusals of engines that have no cuda path.
#include "messages/errors.hpp"
#include "transport/host_memory.hpp"
#include "transport/region_table.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

namespace crescent::transport {
namespace {

TEST(memory_location, prints_and_parses) {
  EXPECT_EQ(to_string(memory_location{}), "cpu:0");
  EXPECT_EQ(to_string(memory_location::cuda(3)), "cuda:3");
  for (auto text : {"cpu:0", "cpu:1", "cuda:0", "cuda:7", "cuda:1023"}) {
    auto where = parse_location(text);
    ASSERT_TRUE(where) << text << ": " << describe(where.error());
    EXPECT_EQ(to_string(*where), text);
  }
  EXPECT_EQ(*parse_location("cuda"), memory_location::cuda(0));
  EXPECT_EQ(*parse_location("cpu"), memory_location::cpu(0));
}

TEST(memory_location, refuses_malformed_text) {
  for (auto text : {"", "gpu:0", "CUDA:0", "cuda:", "cuda:-1", "cuda:1024", "cuda:+1", "cuda: 1",
                    "cuda:1x", "cuda:0x1", "cuda:1:2", "cpu:99999999999", ":0"}) {
    auto where = parse_location(text);
    ASSERT_FALSE(where) << text;
    EXPECT_TRUE(is(where.error(), errc::invalid_argument)) << describe(where.error());
    EXPECT_NE(describe(where.error()).find("memory location"), std::string::npos);
  }
}

// Another process reads every field of a GPU entry as the owner published it; host-memory
// pins refuse it.
TEST(region_table, publishes_gpu_entries_and_host_pins_refuse_them) {
  auto table = std::move(*region_table::create(16));
  device_export d;
  d.location = memory_location::cuda(2);
  d.exportable = true;
  d.pci = (0x1234ull << 16) | (0x3b << 8) | 0x1f;
  d.alloc_offset = 4099;
  for (size_t i = 0; i < d.ipc_handle.size(); ++i)
    d.ipc_handle[i] = std::byte(i * 7 + 1);
  // The table never touches a region's bytes: a made-up address serves.
  auto* fake = reinterpret_cast<std::byte*>(uintptr_t{0x7f0000001000});
  auto h = table->insert(5, fake, 1 << 20, 77, d);
  ASSERT_TRUE(h) << describe(h.error());
  auto remote = remote_region_table::open(getpid(), table->fd(), table->size_bytes());
  ASSERT_TRUE(remote) << describe(remote.error());
  auto e = (*remote)->lookup(*h, 10, 100);
  ASSERT_TRUE(e) << describe(e.error());
  EXPECT_EQ(e->device.location, d.location);
  EXPECT_TRUE(e->device.exportable);
  EXPECT_EQ(e->device.pci, d.pci);
  EXPECT_EQ(e->device.alloc_offset, d.alloc_offset);
  EXPECT_EQ(e->device.ipc_handle, d.ipc_handle);
  EXPECT_EQ(e->address, reinterpret_cast<uintptr_t>(fake));
  EXPECT_EQ(e->segment_id, 0u);

  auto pinned = table->pin(*h, 0, 1);
  ASSERT_FALSE(pinned);
  EXPECT_TRUE(is(pinned.error(), errc::unavailable)) << describe(pinned.error());
  EXPECT_NE(describe(pinned.error()).find("only from the same host"), std::string::npos);
  auto any = table->pin_any(*h, 8, 8);
  ASSERT_TRUE(any) << describe(any.error());
  EXPECT_EQ(any->first, fake + 8);
  EXPECT_EQ(any->second, d.location);
  table->unpin(*h);
  EXPECT_EQ(table->location_of(*h), d.location);
  EXPECT_FALSE(table->remove(*h)); // no pin left behind by the refused one
  EXPECT_FALSE(table->location_of(*h));
}

transfer_options no_cuda_options() {
  transfer_options o;
  o.enable_tcp = false;
  o.enable_shm = false;
  o.enable_rdma = false;
  o.enable_cuda = false;
  return o;
}

TEST(cuda_path, absent_path_refuses_gpu_regions_with_the_reason) {
  auto engine = *transfer_engine::create(no_cuda_options());
  auto status = engine->cuda_status();
  ASSERT_TRUE(is(status, errc::unavailable)) << describe(status);
  host_memory memory = std::move(*host_memory::allocate(4096));
  auto h = engine->register_region(1, memory.data(), memory.size_bytes(), memory_location::cuda(0));
  ASSERT_FALSE(h);
  EXPECT_TRUE(is(h.error(), errc::unavailable)) << describe(h.error());
  EXPECT_NE(describe(h.error()).find("disabled"), std::string::npos) << describe(h.error());
  EXPECT_EQ(engine->paths(1), std::vector<std::string>{"local"});
}

TEST(cuda_path, default_engine_says_whether_it_has_one) {
  auto engine = *transfer_engine::create_local(1);
  if (auto status = engine->cuda_status()) {
    EXPECT_TRUE(is(status, errc::unavailable)) << describe(status);
    EXPECT_EQ(engine->paths(1), std::vector<std::string>{"local"});
  } else {
    EXPECT_EQ(engine->paths(1), (std::vector<std::string>{"cuda", "local"}));
  }
}

// A buffer stated as GPU memory goes to no path that would memcpy it: without a cuda path the
// operation fails, and neither side's bytes change.
TEST(cuda_path, gpu_buffer_without_the_path_fails_cleanly) {
  auto engine = *transfer_engine::create(no_cuda_options());
  host_memory memory = std::move(*host_memory::allocate(4096));
  std::fill_n(memory.data(), memory.size_bytes(), std::byte{0x5a});
  auto h = *engine->register_region(1, memory.data(), memory.size_bytes());
  std::vector<std::byte> local(100, std::byte{0x11});
  for (auto kind : {op_kind::read, op_kind::write}) {
    transfer_op op{kind, local, h, 7};
    op.local_location = memory_location::cuda(0);
    auto id = engine->submit(std::span{&op, 1}, clock_type::now() + std::chrono::seconds(5));
    ASSERT_TRUE(id);
    auto results = *engine->wait(*id);
    EXPECT_EQ(results[0].state, op_state::failed);
    EXPECT_TRUE(is(results[0].reason, errc::unavailable)) << describe(results[0].reason);
    EXPECT_NE(describe(results[0].reason).find("GPU memory"), std::string::npos);
  }
  EXPECT_TRUE(std::all_of(local.begin(), local.end(), [](auto b) { return b == std::byte{0x11}; }));
  EXPECT_TRUE(std::all_of(memory.data(), memory.data() + memory.size_bytes(),
                          [](auto b) { return b == std::byte{0x5a}; }));
}

TEST(cuda_path, checksums_on_gpu_buffers_are_refused) {
  auto engine = *transfer_engine::create_local(1);
  host_memory memory = std::move(*host_memory::allocate(4096));
  auto h = *engine->register_region(1, memory.data(), memory.size_bytes());
  std::vector<std::byte> local(100);
  transfer_op op{op_kind::read, local, h, 0, true, memory_location::cuda(0)};
  auto id = engine->submit(std::span{&op, 1}, clock_type::now() + std::chrono::seconds(5));
  auto results = *engine->wait(*id);
  EXPECT_EQ(results[0].state, op_state::failed);
  EXPECT_TRUE(is(results[0].reason, errc::invalid_argument)) << describe(results[0].reason);
  EXPECT_NE(describe(results[0].reason).find("checksum"), std::string::npos);
}

} // namespace
} // namespace crescent::transport
