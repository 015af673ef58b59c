// Chunked pipeline parallelism (CPP) end to end in simulated time: prefill groups whose stages
// hold slices of the model's layers decode the tokens of one monolithic run; a stage that stops
// mid-request fails that request with the reason and leaks no page; the messages between
// stages are taken only from the instances entitled to send them.
#include "apps/replay/trace.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/worker.capnp.h"
#include "support/test_cluster.hpp"

#include <caf/send.hpp>

namespace crescent::testing {
namespace {

// Four prefill instances, each on its own node, of a model of four layers, in groups of
// `group`; chunks of 40 tokens end inside pages of 16.
cluster_config grouped(uint32_t group) {
  auto cfg = small_cluster(4, 2);
  cfg.model.layers = 4;
  cfg.prefill.chunk_tokens = 40;
  cfg.prefill.group_instances = group;
  cfg.prefill.stream_layers = 1;
  return cfg;
}

std::vector<replay::synthetic_request> requests(const cluster_harness& h) {
  auto w = h.workload();
  w.output_scale = 0.1;
  auto records = replay::read_trace(CRESCENT_TEST_DATA_DIR "/trace_head.jsonl", 12);
  EXPECT_TRUE(records) << describe(records.error());
  std::vector<replay::synthetic_request> out;
  for (size_t i = 0; records && i < records->size(); ++i)
    out.push_back(replay::synthesize((*records)[i], i, w));
  // A shared prefix: the second reuses three blocks, which every stage reads from its head.
  out.push_back(replay::synthesize(record_of({1, 2, 3, 4, 5}, 6, 100'000), out.size(), w));
  out.push_back(replay::synthesize(record_of({1, 2, 3, 9}, 6, 110'000), out.size(), w));
  return out;
}

uint32_t free_pages(cluster_harness& h, const auto& worker) {
  auto reply = h.ask(worker, stats_atom::value);
  EXPECT_TRUE(reply) << describe(reply.error());
  if (!reply)
    return 0;
  auto stats = read_as<wire::WorkerStats>(*reply, [](wire::WorkerStats::Reader in) {
    return caf::expected<uint32_t>{in.getFreePages()};
  });
  return stats ? *stats : 0;
}

void expect_monolithic_with_groups_of(uint32_t group) {
  cluster_harness h{grouped(group)};
  auto reqs = requests(h);
  auto results = h.replay(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(results[i].status, replay::outcome_status::completed) << results[i].reason;
    EXPECT_EQ(results[i].tokens,
              monolithic_tokens(h.cl->config().model, reqs[i].tokens, reqs[i].max_new_tokens))
        << "request " << i << " on groups of " << group;
    EXPECT_EQ(results[i].prefill_instance % group, 0u) << "jobs go to a group's head";
  }
  EXPECT_EQ(results.back().reused_tokens, 3 * h.cl->config().model.block_tokens)
      << "the cached prefix was read by every stage from its head's pages";
}

TEST(prefill_group, groups_of_two_equal_monolithic) {
  expect_monolithic_with_groups_of(2);
}

TEST(prefill_group, groups_of_the_layer_count_equal_monolithic) {
  expect_monolithic_with_groups_of(4);
}

TEST(prefill_group, a_group_that_does_not_divide_the_instances_is_refused) {
  auto cfg = grouped(3);
  auto err = validate(cfg);
  ASSERT_TRUE(err);
  EXPECT_NE(describe(err).find("prefill.group_instances"), std::string::npos) << describe(err);
  cfg = grouped(8); // more stages than layers
  EXPECT_TRUE(validate(cfg));
}

TEST(prefill_group, a_stage_that_stops_mid_request_fails_it_and_leaks_no_page) {
  // The same long prompt alone, first on one group of four to learn when its prefill runs.
  auto make = [] {
    auto cfg = grouped(4);
    cfg.model.context_tokens_max = 4096;
    return cfg;
  };
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 40; ++i)
    ids.push_back(1000 + i);
  uint64_t compute_ns = 0;
  {
    cluster_harness h{make()};
    auto results = h.replay({replay::synthesize(record_of(ids, 4), 0, h.workload())});
    ASSERT_EQ(results.size(), 1u);
    ASSERT_EQ(results[0].status, replay::outcome_status::completed) << results[0].reason;
    compute_ns = results[0].prefill_compute_ns;
    ASSERT_GT(compute_ns, 0u);
  }
  cluster_harness h{make()};
  const auto& dir = h.cl->dir();
  const uint32_t head_pages = free_pages(h, dir.prefill[0]);
  const uint32_t decode_pages[] = {free_pages(h, dir.decode[0]), free_pages(h, dir.decode[1])};
  auto results = std::make_shared<std::vector<replay::request_result>>();
  auto driver = replay::spawn_replay_driver(
      h.sys, *h.cl, {replay::synthesize(record_of(ids, 4), 0, h.workload())}, results);
  caf::anon_send(driver, run_atom::value);
  // Halfway through its prefill (the request is placed at once), stage 2 stops.
  const auto start = h.elapsed();
  ASSERT_TRUE(h.run_until([&] {
    return h.elapsed() - start >= std::chrono::nanoseconds(compute_ns / 2) || !results->empty();
  }));
  ASSERT_TRUE(results->empty()) << "the prefill ended before the stage stopped";
  caf::anon_send_exit(dir.prefill[2], caf::exit_reason::kill);
  ASSERT_TRUE(h.run_until([&] { return !results->empty(); }));
  EXPECT_EQ((*results)[0].status, replay::outcome_status::failed);
  EXPECT_NE((*results)[0].reason.find("stage 2"), std::string::npos) << (*results)[0].reason;
  // The head frees its pages once the other stages have answered their aborts.
  for (int i = 0; i < 100 && free_pages(h, dir.prefill[0]) != head_pages; ++i)
    h.run_until([] { return false; }, 10);
  EXPECT_EQ(free_pages(h, dir.prefill[0]), head_pages);
  EXPECT_EQ(free_pages(h, dir.decode[0]), decode_pages[0]);
  EXPECT_EQ(free_pages(h, dir.decode[1]), decode_pages[1]);
}

TEST(prefill_group, stage_messages_from_others_are_refused) {
  cluster_harness h{grouped(2)};
  const auto& dir = h.cl->dir();
  auto job = make_envelope<wire::StageJob>([](wire::StageJob::Builder out) {
    out.setRequestId(7);
    out.initTokens(1).set(0, 1);
  });
  // Not from the head (a client of this test): refused.
  auto reply = h.ask(dir.prefill[1], stage_atom::value, job);
  ASSERT_FALSE(reply);
  EXPECT_NE(describe(reply.error()).find("only the head"), std::string::npos)
      << describe(reply.error());
  // A head is no stage; a stage takes no prefill job of its own.
  reply = h.ask(dir.prefill[0], stage_atom::value, job);
  ASSERT_FALSE(reply);
  EXPECT_NE(describe(reply.error()).find("no stage"), std::string::npos);
  auto pjob = make_envelope<wire::PrefillJob>([](wire::PrefillJob::Builder out) {
    out.setRequestId(8);
    out.initTokens(1).set(0, 1);
  });
  auto accepted = h.ask(dir.prefill[1], prefill_atom::value, pjob);
  ASSERT_FALSE(accepted);
  EXPECT_NE(describe(accepted.error()).find("jobs go to instance 0"), std::string::npos)
      << describe(accepted.error());
}

} // namespace
} // namespace crescent::testing
