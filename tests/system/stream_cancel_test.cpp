// A request run with a token listener (stream) hears every token as it comes, in order, equal to
// its outcome's; a client that cancels ends its request at once and frees its decode memory, and
// its prefill job, queued or running, stops and frees its pages; a cancel from anyone else is
// refused. Deterministic: the real actors on the test scheduler.
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

// Runs `spec` on `request`, streaming to itself; cancels after `cancel_after` batches (0: never),
// or when told to (cancel_atom).
caf::behavior client(caf::stateful_actor<client_state>* self, request_actor request,
                     typed_envelope<wire::RequestSpec> spec, std::shared_ptr<client_log> log,
                     size_t cancel_after) {
  self->send(request, stream_atom::value, spec, caf::actor_cast<caf::actor>(self));
  return {
      [=](tokens_atom, const typed_envelope<wire::TokenBatch>& batch) {
        auto r = read_as<wire::TokenBatch>(batch, [&](wire::TokenBatch::Reader in) {
          log->final_seen = log->final_seen || in.getFinal();
          return to_vector(in.getTokens());
        });
        ASSERT_TRUE(r) << describe(r.error());
        log->streamed.insert(log->streamed.end(), r->begin(), r->end());
        if (++log->batches == cancel_after)
          self->send(request, cancel_atom::value);
      },
      [=](const typed_envelope<wire::RequestOutcome>& outcome) {
        log->outcome = replay::decode_outcome(outcome, 0, 0);
        self->quit();
      },
      [=](cancel_atom) { self->send(request, cancel_atom::value); },
  };
}

typed_envelope<wire::RequestSpec> spec_of(const replay::synthetic_request& r) {
  return make_request_spec(r.id, r.tokens, r.max_new_tokens);
}

struct worker_stats {
  uint32_t queued = 0, active = 0, free_pages = 0;
  uint64_t compute_ns = 0, bad = 0;
};

template <class Worker>
worker_stats stats_of(cluster_harness& h, const Worker& worker) {
  auto stats = h.ask(worker, stats_atom::value);
  EXPECT_TRUE(stats);
  if (!stats)
    return {};
  auto s = read_as<wire::WorkerStats>(*stats, [](wire::WorkerStats::Reader in) {
    return worker_stats{in.getQueuedJobs(), in.getActiveRequests(), in.getFreePages(),
                        in.getComputeNs(), in.getBadMessages()};
  });
  EXPECT_TRUE(s);
  return s ? *s : worker_stats{};
}

uint32_t decode_active(cluster_harness& h, uint32_t instance) {
  return stats_of(h, h.cl->dir().decode[instance]).active;
}

worker_stats prefill_stats(cluster_harness& h) {
  return stats_of(h, h.cl->dir().prefill[0]);
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

// A prompt of 100 trace blocks: 1,600 tokens, 25 chunks of 64 at the prefill instance.
replay::synthetic_request long_prompt(cluster_harness& h, uint64_t first_block, uint64_t id) {
  std::vector<uint64_t> ids;
  for (uint64_t b = 0; b < 100; ++b)
    ids.push_back(first_block + b);
  return replay::synthesize(record_of(ids, 8), id, h.workload());
}

// Runs a long prompt to its end, then another of the same length cancelled by its client once
// its job has computed a chunk: the job ends at its next step and frees its pages, without
// computing the rest. `stream_min_tokens`: whether the job streams its KV to decode as it goes
// (1,024) or hands it off after its last chunk (none: without the cancel, it would compute all
// 25 chunks and fail only at the hand-off, the reservation being gone).
void cancel_a_running_job(uint32_t stream_min_tokens) {
  auto cfg = small_cluster(1, 1);
  cfg.prefill.stream_min_tokens = stream_min_tokens;
  cluster_harness h{cfg};
  const auto idle = prefill_stats(h);
  auto whole = std::make_shared<client_log>();
  h.sys.spawn(client, h.cl->spawn_request(), spec_of(long_prompt(h, 1000, 1)), whole, size_t{0});
  ASSERT_TRUE(h.run_until([&] { return whole->outcome.has_value(); }));
  ASSERT_EQ(whole->outcome->status, replay::outcome_status::completed) << whole->outcome->reason;
  const uint64_t job_ns = prefill_stats(h).compute_ns - idle.compute_ns;
  ASSERT_GT(job_ns, 0u);

  auto log = std::make_shared<client_log>();
  auto c =
      h.sys.spawn(client, h.cl->spawn_request(), spec_of(long_prompt(h, 5000, 2)), log, size_t{0});
  const uint64_t before = prefill_stats(h).compute_ns;
  ASSERT_TRUE(h.run_until([&] { return prefill_stats(h).compute_ns > before; }));
  auto running = prefill_stats(h);
  EXPECT_EQ(running.active, 1u);
  EXPECT_LT(running.free_pages, idle.free_pages);
  caf::anon_send(c, cancel_atom::value);
  ASSERT_TRUE(h.run_until([&] { return log->outcome.has_value(); }));
  EXPECT_EQ(log->outcome->reason, "cancelled by the client");
  EXPECT_TRUE(log->streamed.empty()); // no first token
  ASSERT_TRUE(h.run_until([&] { return prefill_stats(h).active == 0; }));
  const auto after = prefill_stats(h);
  EXPECT_EQ(after.free_pages, idle.free_pages);
  EXPECT_EQ(after.queued, 0u);
  EXPECT_EQ(after.bad, 0u);
  // At most the chunk in hand when the cancel came, and the one computing: far from all 25.
  EXPECT_LE(after.compute_ns - before, 2 * job_ns / 25 + 1) << job_ns;
  EXPECT_EQ(decode_active(h, 0), 0u);
}

TEST(stream, a_cancel_stops_a_running_prefill_job_and_frees_its_pages) {
  cancel_a_running_job(UINT32_MAX);
}

TEST(stream, a_cancel_stops_a_running_streaming_prefill_job_and_frees_its_pages) {
  cancel_a_running_job(1024);
}

TEST(stream, a_cancel_drops_a_queued_prefill_job_and_the_running_one_completes) {
  cluster_harness h{small_cluster(1, 1)};
  auto first = std::make_shared<client_log>();
  auto second = std::make_shared<client_log>();
  h.sys.spawn(client, h.cl->spawn_request(), spec_of(long_prompt(h, 1000, 1)), first, size_t{0});
  auto c = h.sys.spawn(client, h.cl->spawn_request(), spec_of(long_prompt(h, 5000, 2)), second,
                       size_t{0});
  ASSERT_TRUE(h.run_until([&] { return prefill_stats(h).queued == 1; }));
  caf::anon_send(c, cancel_atom::value);
  ASSERT_TRUE(h.run_until([&] { return second->outcome.has_value(); }));
  EXPECT_EQ(second->outcome->reason, "cancelled by the client");
  EXPECT_EQ(prefill_stats(h).queued, 0u);
  ASSERT_TRUE(h.run_until([&] { return first->outcome.has_value(); }));
  EXPECT_EQ(first->outcome->status, replay::outcome_status::completed) << first->outcome->reason;
  EXPECT_EQ(prefill_stats(h).bad, 0u);
}

TEST(stream, a_prefill_job_is_cancelled_only_by_its_request_or_the_conductor) {
  cluster_harness h{small_cluster(1, 1)};
  auto log = std::make_shared<client_log>();
  auto req = long_prompt(h, 1000, 3);
  h.sys.spawn(client, h.cl->spawn_request(), spec_of(req), log, size_t{0});
  ASSERT_TRUE(h.run_until([&] { return prefill_stats(h).active == 1; }));
  auto cancel = make_envelope<wire::ReleaseRequest>(
      [&](wire::ReleaseRequest::Builder out) { out.setRequestId(req.id); });
  auto worker = h.cl->dir().prefill[0];
  h.sys.spawn([worker, cancel](caf::event_based_actor* other) {
    other->send(worker, cancel_atom::value, cancel);
  });
  ASSERT_TRUE(h.run_until([&] { return log->outcome.has_value(); }));
  EXPECT_EQ(log->outcome->status, replay::outcome_status::completed) << log->outcome->reason;
  EXPECT_EQ(prefill_stats(h).bad, 1u); // the forged cancel, refused and counted
}

} // namespace
} // namespace crescent::testing
