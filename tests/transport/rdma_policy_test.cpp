// The RDMA path's decisions that need no device (rdma_policy.hpp): cooldowns of device pairs,
// what a work completion means, when a queue pair that stops completing is reset or
// destroyed, the owner's quota of accepted queue pairs, service levels, access flags and the
// transports discovery keeps. Where rdma-core is built, also the mapping of verbs statuses and
// asynchronous events onto those decisions.
#include "messages/errors.hpp"
#include "transport/rdma/rdma_policy.hpp"
#include "transport/rdma/rdma_wire.hpp"

#ifdef CRESCENT_HAVE_RDMA
#include "transport/rdma/rdma_device.hpp"
#include "transport/rdma/rdma_queue_pair.hpp"
#endif

#include <gtest/gtest.h>

namespace crescent::transport::rdma {
namespace {

using namespace std::chrono_literals;

const auto t0 = clock_type::time_point{} + 1000s;

// -- backoff -------------------------------------------------------------------------------------

TEST(rdma_backoff, a_fresh_path_is_up) {
  backoff b;
  EXPECT_FALSE(b.down(t0));
  EXPECT_EQ(b.failures(), 0u);
}

TEST(rdma_backoff, each_failure_doubles_the_cooldown_up_to_the_limit) {
  backoff b{100ms, 1000ms};
  b.failed(t0);
  EXPECT_TRUE(b.down(t0));
  EXPECT_TRUE(b.down(t0 + 99ms));
  EXPECT_FALSE(b.down(t0 + 100ms));
  b.failed(t0 + 100ms);
  EXPECT_TRUE(b.down(t0 + 299ms));
  EXPECT_FALSE(b.down(t0 + 300ms));
  for (int i = 0; i < 10; ++i)
    b.failed(t0 + 1s);
  EXPECT_EQ(b.next_delay(), clock_type::duration{1000ms}) << "capped";
  EXPECT_EQ(b.failures(), 12u);
}

TEST(rdma_backoff, a_success_resets_the_delay_but_not_a_cooldown_in_progress) {
  backoff b{100ms, 1000ms};
  b.failed(t0);
  b.failed(t0);
  b.failed(t0); // next delay 800 ms, down until t0 + 400 ms
  const auto until = b.until();
  b.succeeded();
  EXPECT_EQ(b.until(), until) << "work that was in flight may succeed after the failure";
  EXPECT_EQ(b.next_delay(), clock_type::duration{100ms});
  EXPECT_EQ(b.failures(), 0u);
  b.failed(t0 + 1s);
  EXPECT_FALSE(b.down(t0 + 1s + 100ms));
}

TEST(rdma_backoff, concurrent_failures_never_shorten_a_cooldown) {
  backoff b{100ms, 10s};
  b.failed(t0 + 1s); // down until t0 + 1.1 s, next 200 ms
  b.failed(t0);      // a late report of an earlier failure
  EXPECT_TRUE(b.down(t0 + 1050ms));
}

// -- completions ---------------------------------------------------------------------------------

TEST(rdma_completions, success_is_success_and_the_first_one_is_noticed) {
  auto first = judge_completion(wc_kind::success, false, errc::io_error, false, false, "");
  EXPECT_FALSE(first.err);
  EXPECT_TRUE(first.first_success);
  EXPECT_FALSE(first.cool_down);
  auto later = judge_completion(wc_kind::success, true, errc::io_error, true, true, "");
  EXPECT_FALSE(later.err) << "bytes that moved moved, whatever the batch's state";
  EXPECT_FALSE(later.first_success);
}

TEST(rdma_completions, a_queue_pair_that_never_worked_cools_its_path_and_moves_on) {
  auto o = judge_completion(wc_kind::path, false, errc::io_error, false, false,
                            "RDMA READ failed: transport retry counter exceeded");
  EXPECT_TRUE(o.cool_down);
  EXPECT_TRUE(is(o.err, errc::unavailable)) << describe(o.err);
  EXPECT_NE(describe(o.err).find("retry counter exceeded"), std::string::npos);
  EXPECT_FALSE(o.invalidate);
}

TEST(rdma_completions, a_queue_pair_that_worked_fails_as_io_error_without_cooldown) {
  auto o = judge_completion(wc_kind::path, true, errc::io_error, false, false, "broke");
  EXPECT_FALSE(o.cool_down);
  EXPECT_TRUE(is(o.err, errc::io_error)) << "retried on a new queue pair of the same path";
}

TEST(rdma_completions, refused_keys_invalidate_and_never_cool_down) {
  for (bool worked : {false, true}) {
    auto o = judge_completion(wc_kind::remote_access, worked, errc::io_error, false, false, "k");
    EXPECT_TRUE(o.invalidate);
    EXPECT_FALSE(o.cool_down) << "a stale key says nothing about the path";
    EXPECT_TRUE(is(o.err, errc::io_error));
  }
}

TEST(rdma_completions, flushed_work_ends_as_its_queue_pair_broke) {
  auto io = judge_completion(wc_kind::flushed, true, errc::io_error, false, false, "flushed");
  EXPECT_TRUE(is(io.err, errc::io_error));
  EXPECT_FALSE(io.cool_down);
  auto moved = judge_completion(wc_kind::flushed, false, errc::unavailable, false, false, "f");
  EXPECT_TRUE(is(moved.err, errc::unavailable));
  EXPECT_FALSE(moved.cool_down) << "only the completion that failed cools the path down";
}

TEST(rdma_completions, expired_and_cancelled_batches_win_over_the_nics_word) {
  for (auto kind : {wc_kind::flushed, wc_kind::path, wc_kind::remote_access}) {
    auto t = judge_completion(kind, true, errc::io_error, true, false, "x");
    EXPECT_TRUE(is(t.err, errc::timeout));
    auto c = judge_completion(kind, true, errc::io_error, false, true, "x");
    EXPECT_TRUE(is(c.err, errc::cancelled));
  }
  // The path's health is judged all the same.
  auto t = judge_completion(wc_kind::path, false, errc::io_error, true, false, "x");
  EXPECT_TRUE(is(t.err, errc::timeout));
  EXPECT_TRUE(t.cool_down);
}

// -- sweeps --------------------------------------------------------------------------------------

TEST(rdma_sweep, nothing_in_flight_needs_nothing) {
  const sweep_limits l;
  EXPECT_EQ(decide_sweep(0, t0, t0, t0 + 1h, l), sweep_action::none);
  EXPECT_EQ(decide_sweep(0, std::nullopt, std::nullopt, t0, l), sweep_action::none);
}

TEST(rdma_sweep, a_healthy_queue_pair_is_left_alone) {
  const sweep_limits l;
  EXPECT_EQ(decide_sweep(128, std::nullopt, std::nullopt, t0 + 1h, l), sweep_action::none);
}

TEST(rdma_sweep, expired_work_gets_a_grace_then_the_queue_pair_is_reset) {
  sweep_limits l;
  l.expired_grace = 500ms;
  EXPECT_EQ(decide_sweep(3, std::nullopt, t0, t0 + 499ms, l), sweep_action::none);
  EXPECT_EQ(decide_sweep(3, std::nullopt, t0, t0 + 500ms, l), sweep_action::reset);
}

TEST(rdma_sweep, a_broken_queue_pair_whose_flushes_do_not_come_is_destroyed) {
  sweep_limits l;
  l.flush_timeout = 1s;
  EXPECT_EQ(decide_sweep(2, t0, std::nullopt, t0 + 999ms, l), sweep_action::none);
  EXPECT_EQ(decide_sweep(2, t0, std::nullopt, t0 + 1s, l), sweep_action::destroy);
  // Broken already: expired work does not reset it again, it waits for the flush bound.
  EXPECT_EQ(decide_sweep(2, t0, t0 - 1h, t0 + 10ms, l), sweep_action::none);
}

// -- quotas --------------------------------------------------------------------------------------

TEST(rdma_quota, each_connection_gets_a_bounded_share) {
  qp_quota q{2, 3};
  int a = 0, b = 0;
  EXPECT_FALSE(q.take(&a));
  EXPECT_FALSE(q.take(&a));
  auto err = q.take(&a);
  EXPECT_TRUE(is(err, errc::no_space));
  EXPECT_NE(describe(err).find("the most one connection may hold (2)"), std::string::npos)
      << describe(err);
  EXPECT_EQ(q.held(&a), 2u);
  EXPECT_FALSE(q.take(&b));
  err = q.take(&b);
  EXPECT_TRUE(is(err, errc::no_space));
  EXPECT_NE(describe(err).find("the most it serves at once (3)"), std::string::npos)
      << describe(err);
  EXPECT_EQ(q.total(), 3u);
}

TEST(rdma_quota, released_queue_pairs_make_room_again) {
  qp_quota q{2, 3};
  int a = 0, b = 0;
  ASSERT_FALSE(q.take(&a));
  ASSERT_FALSE(q.take(&a));
  q.give_back(&a);
  EXPECT_EQ(q.held(&a), 1u);
  EXPECT_FALSE(q.take(&a)) << "a release frees a place in the connection's share";
  ASSERT_FALSE(q.take(&b));
  q.give_back_all(&a);
  EXPECT_EQ(q.held(&a), 0u);
  EXPECT_EQ(q.total(), 1u);
  EXPECT_FALSE(q.take(&b));
  q.give_back_all(&a); // nothing held: nothing happens
  q.clear();
  EXPECT_EQ(q.total(), 0u);
  EXPECT_EQ(q.held(&b), 0u);
}

// -- links ---------------------------------------------------------------------------------------

TEST(rdma_links, roce_service_levels_are_clamped_to_seven) {
  EXPECT_EQ(effective_service_level(link_ethernet, 0), 0);
  EXPECT_EQ(effective_service_level(link_ethernet, 7), 7);
  EXPECT_EQ(effective_service_level(link_ethernet, 8), 7);
  EXPECT_EQ(effective_service_level(link_ethernet, 15), 7);
  EXPECT_EQ(effective_service_level(link_infiniband, 15), 15);
  EXPECT_EQ(effective_service_level(link_infiniband, 9), 9);
}

TEST(rdma_links, only_the_owners_ends_grant_remote_access) {
  EXPECT_EQ(qp_access_flags(qp_role::initiator), 0);
  EXPECT_EQ(qp_access_flags(qp_role::responder), access_remote_read | access_remote_write);
}

TEST(rdma_links, only_infiniband_transport_devices_are_kept) {
  EXPECT_TRUE(unsupported_transport(transport_infiniband).empty());
  EXPECT_NE(unsupported_transport(transport_iwarp).find("iWARP"), std::string::npos);
  EXPECT_NE(unsupported_transport(transport_usnic).find("usNIC"), std::string::npos);
  EXPECT_NE(unsupported_transport(transport_usnic_udp).find("usNIC"), std::string::npos);
  EXPECT_NE(unsupported_transport(transport_unspecified).find("unknown"), std::string::npos);
  EXPECT_NE(unsupported_transport(-1).find("unknown"), std::string::npos);
}

// -- a WRITE that a fault corrupts ---------------------------------------------------------------

TEST(rdma_corrupted_write, the_changed_window_is_gathered_between_the_source_s_bytes) {
  // A 100-byte slice at 0x1000 (key 7) whose window [50, 58) comes from 0x9000 (key 9).
  auto g = gather_around(0x1000, 100, 7, 50, 8, 0x9000, 9);
  ASSERT_EQ(g.count, 3u);
  EXPECT_EQ(g.parts[0], (gather_part{0x1000, 50, 7}));
  EXPECT_EQ(g.parts[1], (gather_part{0x9000, 8, 9}));
  EXPECT_EQ(g.parts[2], (gather_part{0x1000 + 58, 42, 7}));
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < g.count; ++i)
    bytes += g.parts[i].length;
  EXPECT_EQ(bytes, 100u) << "as many bytes as the slice, to the same remote address";
}

TEST(rdma_corrupted_write, parts_of_no_bytes_are_left_out) {
  auto one = gather_around(0x1000, 1, 7, 0, 1, 0x9000, 9); // the window is the whole slice
  ASSERT_EQ(one.count, 1u);
  EXPECT_EQ(one.parts[0], (gather_part{0x9000, 1, 9}));
  auto tail = gather_around(0x1000, 16, 7, 8, 8, 0x9000, 9); // the window ends the slice
  ASSERT_EQ(tail.count, 2u);
  EXPECT_EQ(tail.parts[0], (gather_part{0x1000, 8, 7}));
  EXPECT_EQ(tail.parts[1], (gather_part{0x9000, 8, 9}));
}

#ifdef CRESCENT_HAVE_RDMA

TEST(rdma_verbs_mapping, work_completion_statuses) {
  EXPECT_EQ(kind_of(IBV_WC_SUCCESS), wc_kind::success);
  EXPECT_EQ(kind_of(IBV_WC_WR_FLUSH_ERR), wc_kind::flushed);
  EXPECT_EQ(kind_of(IBV_WC_REM_ACCESS_ERR), wc_kind::remote_access);
  EXPECT_EQ(kind_of(IBV_WC_REM_INV_REQ_ERR), wc_kind::remote_access);
  EXPECT_EQ(kind_of(IBV_WC_REM_OP_ERR), wc_kind::remote_access);
  EXPECT_EQ(kind_of(IBV_WC_RETRY_EXC_ERR), wc_kind::path);
  EXPECT_EQ(kind_of(IBV_WC_RNR_RETRY_EXC_ERR), wc_kind::path);
  EXPECT_EQ(kind_of(IBV_WC_LOC_QP_OP_ERR), wc_kind::path);
  EXPECT_EQ(kind_of(IBV_WC_FATAL_ERR), wc_kind::path);
}

TEST(rdma_verbs_mapping, asynchronous_events) {
  EXPECT_EQ(classify_async_event(IBV_EVENT_QP_FATAL), async_action::qp_failed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_QP_REQ_ERR), async_action::qp_failed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_QP_ACCESS_ERR), async_action::qp_failed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_PATH_MIG_ERR), async_action::qp_failed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_CQ_ERR), async_action::device_failed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_DEVICE_FATAL), async_action::device_failed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_PORT_ERR), async_action::port_down);
  EXPECT_EQ(classify_async_event(IBV_EVENT_PORT_ACTIVE), async_action::port_up);
  EXPECT_EQ(classify_async_event(IBV_EVENT_COMM_EST), async_action::ignore);
  EXPECT_EQ(classify_async_event(IBV_EVENT_LID_CHANGE), async_action::address_changed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_GID_CHANGE), async_action::address_changed);
  EXPECT_EQ(classify_async_event(IBV_EVENT_SM_CHANGE), async_action::ignore);
  EXPECT_EQ(classify_async_event(IBV_EVENT_SQ_DRAINED), async_action::ignore);
}

TEST(rdma_verbs_mapping, link_defaults_follow_the_options) {
  const link_options l;
  const transfer_options o;
  EXPECT_EQ(l.qp_timeout, o.rdma_qp_timeout);
  EXPECT_EQ(l.qp_timeout, 18);
  EXPECT_EQ(l.retry_count, o.rdma_retry_count);
  EXPECT_EQ(l.rnr_retry, o.rdma_rnr_retry);
  EXPECT_FALSE(device_options{}.fork_safe) << "fork safety is opt-in";
  EXPECT_FALSE(o.rdma_fork_safe);
}

#endif

} // namespace
} // namespace crescent::transport::rdma
