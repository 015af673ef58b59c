// A request run with a token listener (stream) hears every token as it comes, in order, equal to
// its outcome's; a client that cancels ends its request at once and frees its decode memory; a
// cancel from anyone else is refused. Deterministic: the real actors on the test scheduler.
#include "apps/replay/report.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"
#include "support/test_cluster.hpp"

#include <caf/stateful_actor.hpp>

namespace crescent::testing {
namespace {

struct client_log {
  std::vector<uint32_t> streamed;
  size_t batches = 0;
  bool final_seen = false;
  std::optional<replay::request_result> outcome;
};

struct client_state {
  static inline const char* name = "test_client";
};

// Runs `spec` on `request`, streaming to itself; cancels after `cancel_after` batches (0: never).
caf::behavior client(caf::stateful_actor<client_state>* self, request_actor request, envelope spec,
                     std::shared_ptr<client_log> log, size_t cancel_after) {
  self->send(request, stream_atom::value, spec, caf::actor_cast<caf::actor>(self));
  return {
      [=](tokens_atom, const envelope& batch) {
        auto r = read_as<wire::TokenBatch>(batch, [&](wire::TokenBatch::Reader in) {
          log->final_seen = log->final_seen || in.getFinal();
          return to_vector(in.getTokens());
        });
        ASSERT_TRUE(r) << describe(r.error());
        log->streamed.insert(log->streamed.end(), r->begin(), r->end());
        if (++log->batches == cancel_after)
          self->send(request, cancel_atom::value);
      },
      [=](const envelope& outcome) {
        log->outcome = replay::decode_outcome(outcome, 0, 0);
        self->quit();
      },
  };
}

envelope spec_of(const replay::synthetic_request& r) {
  return make_request_spec(r.id, r.tokens, r.max_new_tokens);
}

uint32_t decode_active(cluster_harness& h, uint32_t instance) {
  auto stats = h.ask(h.cl->dir().decode[instance], stats_atom::value);
  EXPECT_TRUE(stats);
  auto n = read_as<wire::WorkerStats>(
      *stats, [](wire::WorkerStats::Reader in) { return in.getActiveRequests(); });
  EXPECT_TRUE(n);
  return n ? *n : 0;
}

TEST(stream, the_listener_hears_every_token_in_order_as_the_outcome_has_them) {
  cluster_harness h{small_cluster(1, 1)};
  auto req = replay::synthesize(record_of({1, 2}, 40), 7, h.workload());
  auto log = std::make_shared<client_log>();
  h.sys.spawn(client, h.cl->spawn_request(), spec_of(req), log, size_t{0});
  ASSERT_TRUE(h.run_until([&] { return log->outcome.has_value(); }));
  ASSERT_EQ(log->outcome->status, replay::outcome_status::completed) << log->outcome->reason;
  EXPECT_EQ(log->streamed, log->outcome->tokens);
  EXPECT_EQ(log->streamed.size(), 40u);
  EXPECT_TRUE(log->final_seen);
  EXPECT_GT(log->batches, 1u); // the first token from prefill, the rest from decode
  EXPECT_EQ(log->streamed, monolithic_tokens(h.cl->config().model, req.tokens, req.max_new_tokens));
}

TEST(stream, a_cancel_from_the_client_ends_the_request_and_frees_its_decode_memory) {
  cluster_harness h{small_cluster(1, 1)};
  auto req = replay::synthesize(record_of({1, 2}, 400), 8, h.workload());
  auto log = std::make_shared<client_log>();
  h.sys.spawn(client, h.cl->spawn_request(), spec_of(req), log, size_t{2});
  ASSERT_TRUE(h.run_until([&] { return log->outcome.has_value(); }));
  EXPECT_EQ(log->outcome->status, replay::outcome_status::failed);
  EXPECT_EQ(log->outcome->reason, "cancelled by the client");
  EXPECT_LT(log->outcome->tokens.size(), 400u);
  h.sched.run();
  EXPECT_EQ(decode_active(h, 0), 0u);
}

TEST(stream, a_cancel_from_anyone_but_the_client_is_refused) {
  cluster_harness h{small_cluster(1, 1)};
  auto req = replay::synthesize(record_of({1}, 20), 9, h.workload());
  auto log = std::make_shared<client_log>();
  auto request = h.cl->spawn_request();
  h.sys.spawn(client, request, spec_of(req), log, size_t{0});
  h.sched.run_once(); // the client sends its stream
  h.sys.spawn(
      [request](caf::event_based_actor* other) { other->send(request, cancel_atom::value); });
  ASSERT_TRUE(h.run_until([&] { return log->outcome.has_value(); }));
  EXPECT_EQ(log->outcome->status, replay::outcome_status::completed) << log->outcome->reason;
  EXPECT_EQ(log->streamed.size(), 20u);
}

} // namespace
} // namespace crescent::testing
