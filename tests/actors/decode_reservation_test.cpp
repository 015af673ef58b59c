// Decode reservations belong to the request that made them: nobody else may release them, and
// they are freed when that request's actor ends without releasing (crash, lost process).
#include "messages/checked_read.hpp"
#include "messages/schema/worker.capnp.h"
#include "support/test_cluster.hpp"

namespace crescent::testing {
namespace {

uint32_t free_pages(cluster_harness& h) {
  auto stats = h.ask(h.cl->dir().decode[0], stats_atom::value);
  EXPECT_TRUE(stats);
  auto n = read_as<wire::WorkerStats>(
      *stats, [](wire::WorkerStats::Reader in) { return in.getFreePages(); });
  return n ? *n : 0;
}

envelope reserve_msg(uint64_t id) {
  return make_envelope<wire::ReserveRequest>([&](wire::ReserveRequest::Builder out) {
    out.setRequestId(id);
    out.setPromptTokens(100);
    out.setMaxNewTokens(29); // 128 positions: 8 pages of 16 tokens
  });
}

envelope release_msg(uint64_t id) {
  return make_envelope<wire::ReleaseRequest>(
      [&](wire::ReleaseRequest::Builder out) { out.setRequestId(id); });
}

TEST(decode_reservation, only_the_requester_releases_and_its_end_frees_the_pages) {
  cluster_harness h{small_cluster(1, 1)};
  const auto decode = h.cl->dir().decode[0];
  const uint32_t capacity = free_pages(h);
  // A requester that stays alive after its reservation, like a request actor waiting for KV.
  auto reserved = std::make_shared<bool>(false);
  auto holder = h.sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->request(decode, caf::infinite, reserve_atom::value, reserve_msg(5))
        .then([=](const envelope&) { *reserved = true; });
    return {[](const caf::message&) {}};
  });
  ASSERT_TRUE(h.run_until([&] { return *reserved; }));
  EXPECT_EQ(free_pages(h), capacity - 8);

  auto err = h.ask_void(decode, release_atom::value, release_msg(5));
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  EXPECT_EQ(free_pages(h), capacity - 8);

  caf::anon_send_exit(holder, caf::exit_reason::kill);
  h.sched.run();
  EXPECT_EQ(free_pages(h), capacity) << "the requester's end frees its reservation";
}

TEST(decode_reservation, over_budget_reservations_are_refused) {
  auto cfg = small_cluster(1, 1);
  cfg.decode.request_tokens_max = 100;
  cluster_harness h{cfg};
  auto too_big = h.ask(h.cl->dir().decode[0], reserve_atom::value, reserve_msg(1));
  ASSERT_FALSE(too_big);
  EXPECT_TRUE(is(too_big.error(), errc::limit_exceeded)) << describe(too_big.error());
}

} // namespace
} // namespace crescent::testing
