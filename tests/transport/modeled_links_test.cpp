// Modeled links on hand-computed cases: exact nanoseconds, FIFO sharing of a NIC, and the
// transfer engine reporting them per operation.
#include "transport/modeled_links.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace crescent::transport {
namespace {

// 1 GB/s NICs and a 4 GB/s local link make the arithmetic easy: 1 byte = 1 ns through a NIC.
link_profile simple_profile() {
  link_profile p;
  p.nic_bytes_per_s = 1'000'000'000;
  p.local_bytes_per_s = 4'000'000'000;
  p.nic_latency_ns = 100;
  p.local_latency_ns = 10;
  p.bytes_scale = 1;
  p.ssd_read_bytes_per_s = 2'000'000'000; // 2 bytes a ns
  p.ssd_write_bytes_per_s = 500'000'000;  // 2 ns a byte
  p.ssd_latency_ns = 50;
  return p;
}

struct fixture {
  int64_t now_ns = 0;
  modeled_links links{4, simple_profile(), [this] { return now_ns; }};
};

TEST(modeled_links, one_transfer_takes_bytes_over_bandwidth_plus_latency) {
  fixture f;
  EXPECT_EQ(f.links.reserve(0, 1, 1000), 1000u + 100u);
  f.now_ns = 10'000; // long after: nothing to wait for
  EXPECT_EQ(f.links.reserve(2, 3, 500), 500u + 100u);
}

TEST(modeled_links, two_flows_through_one_nic_take_turns) {
  fixture f;
  // Both leave node 0 at t = 0, to different nodes: node 0's link out is shared.
  EXPECT_EQ(f.links.reserve(0, 1, 1000), 1100u);
  EXPECT_EQ(f.links.reserve(0, 2, 1000), 2100u) << "waits 1000 ns for the first";
  // A flow between two other nodes does not wait.
  EXPECT_EQ(f.links.reserve(3, 2, 1000), 2000u + 1100u) << "node 2's link in is busy until 2000";
  EXPECT_EQ(f.links.reserve(1, 3, 1000), 1100u);
  EXPECT_EQ(f.links.nic_out(0).bytes, 2000u);
  EXPECT_EQ(f.links.nic_out(0).busy_ns, 2000u);
  EXPECT_EQ(f.links.nic_in(2).operations, 2u);
}

TEST(modeled_links, a_later_flow_waits_only_for_what_is_left) {
  fixture f;
  EXPECT_EQ(f.links.reserve(0, 1, 1000), 1100u);
  f.now_ns = 600;
  EXPECT_EQ(f.links.reserve(0, 1, 1000), 400u + 1000u + 100u);
  f.now_ns = 5000;
  EXPECT_EQ(f.links.reserve(0, 1, 1000), 1100u);
}

TEST(modeled_links, within_a_node_the_local_link_carries_it) {
  fixture f;
  EXPECT_EQ(f.links.reserve(1, 1, 4000), 1000u + 10u);
  EXPECT_EQ(f.links.reserve(1, 1, 4000), 2000u + 10u);
  EXPECT_EQ(f.links.reserve(0, 1, 1000), 1100u) << "the NICs are not the local link";
  EXPECT_EQ(f.links.local(1).bytes, 8000u);
}

TEST(modeled_links, bytes_scale_and_rounding) {
  auto p = simple_profile();
  p.bytes_scale = 1000;
  p.nic_bytes_per_s = 3'000'000'000; // 3 bytes per ns: 1000 scaled bytes take 333.33 ns
  int64_t now = 0;
  modeled_links links{2, p, [&] { return now; }};
  EXPECT_EQ(links.reserve(0, 1, 1), 334u + 100u) << "rounded up";
  EXPECT_EQ(links.nic_out(0).bytes, 1000u);
}

TEST(modeled_links, a_drive_reads_and_writes_side_by_side_each_in_turn) {
  fixture f;
  EXPECT_EQ(f.links.reserve_ssd(1, 1000, false), 500u + 50u); // a read: 2 bytes a ns
  EXPECT_EQ(f.links.reserve_ssd(1, 1000, true), 2000u + 50u); // a write beside it, not behind
  EXPECT_EQ(f.links.reserve_ssd(1, 1000, false), 500u + 500u + 50u); // behind the first read
  EXPECT_EQ(f.links.reserve_ssd(2, 1000, false), 500u + 50u);        // another node's drive
  f.now_ns = 800;
  EXPECT_EQ(f.links.reserve_ssd(1, 100, true), 1200u + 200u + 50u); // what is left of the write
  EXPECT_EQ(f.links.ssd_read(1).bytes, 2000u);
  EXPECT_EQ(f.links.ssd_read(1).busy_ns, 1000u);
  EXPECT_EQ(f.links.ssd_write(1).bytes, 1100u);
  EXPECT_EQ(f.links.ssd_write(1).operations, 2u);
  EXPECT_EQ(f.links.nic_out(1).bytes, 0u) << "the drive is no NIC";
}

TEST(modeled_links, nodes_outside_the_cluster_cost_latency_only) {
  fixture f;
  EXPECT_EQ(f.links.reserve(0, 9, 1000), 100u);
  EXPECT_EQ(f.links.nic_out(0).operations, 0u);
}

TEST(modeled_links, the_transfer_engine_reports_each_operation) {
  int64_t now = 0;
  auto links = std::make_shared<modeled_links>(3, simple_profile(), [&] { return now; });
  auto engine = *transfer_engine::create_modeled(7, links);
  std::vector<std::byte> a(1000), b(1000), c(1000);
  auto ra = *engine->register_region(0, a.data(), a.size());
  auto rb = *engine->register_region(1, b.data(), b.size());
  auto rc = *engine->register_region(2, c.data(), c.size());
  (void)ra;
  a[0] = std::byte{42};
  // Node 0 writes to node 1 and node 2 in one batch, then reads node 1 back.
  std::vector<transfer_op> ops{{op_kind::write, {a.data(), 1000}, rb},
                               {op_kind::write, {a.data(), 1000}, rc},
                               {op_kind::read, {a.data(), 500}, rb}};
  auto id = engine->submit(ops, clock_type::now() + std::chrono::seconds(5));
  ASSERT_TRUE(id);
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  ASSERT_EQ(results->size(), 3u);
  for (const auto& r : *results)
    EXPECT_EQ(r.state, op_state::completed);
  EXPECT_EQ((*results)[0].modeled_ns, 1100u);
  EXPECT_EQ((*results)[1].modeled_ns, 2100u) << "node 0's NIC is shared";
  EXPECT_EQ((*results)[2].modeled_ns, 600u) << "a read crosses the other direction";
  EXPECT_EQ(b[0], std::byte{42}) << "the bytes moved for real";
  EXPECT_EQ(c[0], std::byte{42});
}

TEST(modeled_links, a_transfer_past_its_deadline_times_out) {
  int64_t now = 0;
  auto slow = simple_profile();
  slow.nic_bytes_per_s = 1'000'000; // 1 MB/s: a megabyte takes a second
  auto links = std::make_shared<modeled_links>(2, slow, [&] { return now; });
  auto engine = *transfer_engine::create_modeled(7, links);
  std::vector<std::byte> a(1 << 20), b(1 << 20);
  [[maybe_unused]] auto ra = *engine->register_region(0, a.data(), a.size());
  auto rb = *engine->register_region(1, b.data(), b.size());
  std::vector<transfer_op> ops{{op_kind::write, {a.data(), a.size()}, rb}};
  auto id = engine->submit(ops, clock_type::now() + std::chrono::milliseconds(200));
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0].state, op_state::timed_out);
  EXPECT_LE((*results)[0].modeled_ns, 200'000'000u) << "it ends at the deadline, cut off";
}

TEST(modeled_links, an_injected_slice_delay_adds_to_its_operations_modeled_time) {
  int64_t now = 0;
  auto links = std::make_shared<modeled_links>(3, simple_profile(), [&] { return now; });
  auto engine = *transfer_engine::create_modeled(7, links);
  std::vector<std::byte> a(1000), b(1000), c(1000);
  [[maybe_unused]] auto ra = *engine->register_region(0, a.data(), a.size());
  auto rb = *engine->register_region(1, b.data(), b.size());
  auto rc = *engine->register_region(2, c.data(), c.size());
  // Slices to node 2 are held 5 us; on modeled links the delay is modeled time, whatever
  // fault_delays says.
  engine->set_fault_hook([](const slice_view& v) {
    return v.remote_node == 2 ? slice_verdict{slice_fault::delay, std::chrono::microseconds(5)}
                              : slice_verdict{};
  });
  a[0] = std::byte{42};
  std::vector<transfer_op> ops{{op_kind::write, {a.data(), 1000}, rb},
                               {op_kind::write, {a.data(), 1000}, rc}};
  auto id = engine->submit(ops, clock_type::now() + std::chrono::seconds(5));
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0].state, op_state::completed);
  EXPECT_EQ((*results)[1].state, op_state::completed);
  EXPECT_EQ((*results)[0].modeled_ns, 1100u) << "not delayed";
  EXPECT_EQ((*results)[1].modeled_ns, 2100u + 5000u) << "as before, and 5 us later";
  EXPECT_EQ(c[0], std::byte{42}) << "the bytes moved at once";

  // A delay past the batch's deadline times the operation out there.
  engine->set_fault_hook([](const slice_view&) {
    return slice_verdict{slice_fault::delay, std::chrono::seconds(10)};
  });
  id = engine->submit(ops, clock_type::now() + std::chrono::seconds(1));
  results = engine->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0].state, op_state::timed_out);
  EXPECT_LE((*results)[0].modeled_ns, 1'000'000'000u) << "it ends at the deadline, cut off";
}

TEST(modeled_links, a_local_engine_under_a_virtual_clock_models_injected_delays) {
  // fault_delays::modeled: what a simulation with real bytes (crescent chaos) asks for.
  auto engine = *transfer_engine::create_local(7);
  std::vector<std::byte> a(64, std::byte{7}), b(64);
  auto rb = *engine->register_region(1, b.data(), b.size());
  engine->set_fault_hook(
      [](const slice_view&) {
        return slice_verdict{slice_fault::delay, std::chrono::milliseconds(250)};
      },
      fault_delays::modeled);
  std::vector<transfer_op> ops{{op_kind::write, {a.data(), 64}, rb}};
  auto id = engine->submit(ops, clock_type::now() + std::chrono::seconds(5));
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0].state, op_state::completed);
  EXPECT_EQ((*results)[0].modeled_ns, 250'000'000u);
  EXPECT_EQ(b[0], std::byte{7});
}

TEST(modeled_links, real_engines_report_no_modeled_time) {
  auto engine = *transfer_engine::create_local(7);
  std::vector<std::byte> a(64), b(64);
  auto rb = *engine->register_region(1, b.data(), b.size());
  ASSERT_FALSE(engine->write(rb, 0, a));
  std::vector<transfer_op> ops{{op_kind::write, {a.data(), 64}, rb}};
  auto id = engine->submit(ops, clock_type::now() + std::chrono::seconds(5));
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0].modeled_ns, 0u);
}

} // namespace
} // namespace crescent::transport
