// The conductor actor on CAF's deterministic scheduler: what it learns from reports.
#include "actors/conductor/conductor.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"
#include "support/deterministic.hpp"
#include "support/simple_time_model.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace crescent::testing {
namespace {

std::shared_ptr<const time_model> simple_model() {
  return std::make_shared<const time_model>(simple_time_model()); // support/simple_time_model.hpp
}

// Stands in for both a request actor and prefill instance 0: it passes on what the test sends it
// with itself as the sender, as a request asks for its placement and reports its end, and as a
// worker reports its job.
caf::behavior relay(caf::event_based_actor* self, std::shared_ptr<conductor_actor> to) {
  auto void_reply = [=](auto atom, const auto& m) {
    auto rp = self->make_response_promise();
    self->request(*to, caf::infinite, atom, m)
        .then([=]() mutable { rp.deliver(caf::unit); },
              [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
    return rp;
  };
  return {
      [=](schedule_atom a, const typed_envelope<wire::ScheduleRequest>& m) {
        auto rp = self->make_response_promise();
        self->request(*to, caf::infinite, a, m)
            .then(
                [=](typed_envelope<wire::ScheduleReply>& reply) mutable {
                  rp.deliver(std::move(reply));
                },
                [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      },
      [=](report_atom a, const typed_envelope<wire::PrefillReport>& m) { return void_reply(a, m); },
      [=](finished_atom a, const typed_envelope<wire::RequestReport>& m) {
        return void_reply(a, m);
      },
  };
}

class conductor_harness : public deterministic_system {
 public:
  // One prefill instance on node 0 and one decode instance on node 1; or, `wide`, two prefill
  // instances (nodes 0 and 2) and two decode instances (both on node 1) under `decode_tbt_slack`.
  explicit conductor_harness(bool wide = false, double decode_tbt_slack = 0) {
    auto target = std::make_shared<conductor_actor>();
    client = caf::actor_cast<conductor_actor>(sys.spawn(relay, target));
    directory dir;
    dir.prefill = {caf::actor_cast<prefill_worker_actor>(client)};
    conductor_options o;
    o.nodes = 2;
    o.prefill_node = {0};
    o.decode_node = {1};
    if (wide) {
      dir.prefill.push_back(dir.prefill.front());
      o.nodes = 3;
      o.prefill_node = {0, 2};
      o.decode_node = {1, 1};
    }
    o.dir = directory_ref::of(std::move(dir));
    o.decode_tbt_slack = decode_tbt_slack;
    o.admission = admission_mode::none;
    o.block_tokens = 16;
    o.decode_capacity_tokens = 1'000'000;
    o.model = simple_model();
    conductor = spawn_conductor(sys, o);
    *target = conductor;
  }

  struct placement {
    uint64_t ttft_ns = 0; // predicted; 0: not placed
    uint32_t prefill = 0;
    uint32_t decode = 0;
  };

  // A 64-token prompt of 4 uncached blocks; its predicted TTFT (0: not placed).
  uint64_t schedule(uint64_t id) { return place(id).ttft_ns; }

  // Its ScheduleRequest, avoiding the instances a failed attempt used.
  static typed_envelope<wire::ScheduleRequest>
  schedule_msg(uint64_t id, const std::vector<uint32_t>& avoid_prefill = {},
               const std::vector<uint32_t>& avoid_decode = {}) {
    return make_envelope<wire::ScheduleRequest>([&](wire::ScheduleRequest::Builder out) {
      out.setRequestId(id);
      out.setPromptTokens(64);
      out.setMaxNewTokens(8);
      auto keys = out.initBlockKeys(4);
      for (unsigned i = 0; i < 4; ++i)
        write_key(keys[i], block_key{0, 100 * id + i});
      copy_to(out.initAvoidPrefill(static_cast<unsigned>(avoid_prefill.size())), avoid_prefill);
      copy_to(out.initAvoidDecode(static_cast<unsigned>(avoid_decode.size())), avoid_decode);
    });
  }

  placement place(uint64_t id, std::vector<uint32_t> avoid_prefill = {},
                  std::vector<uint32_t> avoid_decode = {}) {
    auto reply = ask(client, schedule_atom::value, schedule_msg(id, avoid_prefill, avoid_decode));
    EXPECT_TRUE(reply);
    if (!reply)
      return {};
    return *read_as<wire::ScheduleReply>(*reply, [](wire::ScheduleReply::Reader in) {
      if (!in.isPlaced())
        return placement{};
      auto p = in.getPlaced();
      return placement{p.getPredictedTtftNs(), p.getPrefillInstance(), p.getDecodeInstance()};
    });
  }

  // The job ended having reused `reused` of its 64 tokens and computed the rest in `compute_ns`;
  // then the request ended.
  void report(uint64_t id, uint32_t reused, uint64_t compute_ns) {
    report_job(id, reused, compute_ns);
    end(id);
  }

  // Prefill instance `instance` (on node `node`) reports the job of request `id`.
  void report_job(uint64_t id, uint32_t reused, uint64_t compute_ns, uint32_t instance = 0,
                  uint32_t node = 0) {
    auto msg = make_envelope<wire::PrefillReport>([&](wire::PrefillReport::Builder out) {
      out.setRequestId(id);
      out.setInstance(instance);
      out.setNode(node);
      out.setOk(true);
      out.setComputedTokens(64 - reused);
      out.setReusedTokens(reused);
      out.setComputeNs(compute_ns);
    });
    EXPECT_FALSE(ask_void(client, report_atom::value, msg));
  }

  void end(uint64_t id) {
    auto ended = make_envelope<wire::RequestReport>([&](wire::RequestReport::Builder out) {
      out.setRequestId(id);
      out.setCompleted(true);
    });
    EXPECT_FALSE(ask_void(client, finished_atom::value, ended));
  }

  // The conductor's predicted queue time of prefill instance 0 (its stats).
  uint64_t predicted_queue_ns() {
    auto stats = ask(conductor, stats_atom::value);
    EXPECT_TRUE(stats);
    auto q = read_as<wire::ConductorStats>(*stats, [](wire::ConductorStats::Reader in) {
      return in.getPrefillQueueNs().size() == 1 ? in.getPrefillQueueNs()[0] : UINT64_MAX;
    });
    EXPECT_TRUE(q);
    return q ? *q : UINT64_MAX;
  }

  conductor_actor conductor;
  conductor_actor client; // the relay: it answers what it passes on as the conductor does
};

TEST(conductor, corrects_its_model_by_what_a_job_computed_not_by_what_was_cached_at_placement) {
  conductor_harness h;
  const uint64_t first = h.schedule(1);
  ASSERT_GT(first, 0u);
  // The job found half its prompt cached at run time (a job before it stored it) and computed
  // the other half at exactly the model's speed: nothing to correct.
  h.report(1, 32, 32'000);
  EXPECT_EQ(h.schedule(2), first);
  // This one computed all 64 tokens in twice the predicted time: a step of 1/32 towards it.
  h.report(2, 0, 128'000);
  EXPECT_EQ(h.schedule(3), first + 64'000 / 32);
}

TEST(conductor, takes_reports_and_ends_only_from_the_actors_entitled_to_send_them) {
  conductor_harness h;
  ASSERT_GT(h.schedule(1), 0u);
  // Another actor than prefill instance 0's worker reports its job; another than the request
  // that asked says the request ended.
  auto report = make_envelope<wire::PrefillReport>([](wire::PrefillReport::Builder out) {
    out.setRequestId(1);
    out.setInstance(0);
    out.setNode(0);
    out.setOk(true);
    out.setComputedTokens(64);
    out.setComputeNs(1);
  });
  auto err = h.ask_void(h.conductor, report_atom::value, report);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  auto ended = make_envelope<wire::RequestReport>([](wire::RequestReport::Builder out) {
    out.setRequestId(1);
    out.setCompleted(true);
  });
  err = h.ask_void(h.conductor, finished_atom::value, ended);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  // A report for an instance the conductor does not have, or on another node, is refused too.
  auto elsewhere = make_envelope<wire::PrefillReport>([](wire::PrefillReport::Builder out) {
    out.setRequestId(1);
    out.setInstance(0);
    out.setNode(1);
  });
  err = h.ask_void(h.client, report_atom::value, elsewhere);
  EXPECT_TRUE(is(err, errc::invalid_argument)) << describe(err);
  // Neither forgery moved anything: the real report, with the model's own time, corrects
  // nothing, and the placement's prediction is as before.
  const uint64_t before = h.schedule(2);
  h.report(1, 0, 64'000);
  EXPECT_EQ(h.schedule(3), before);
}

// A request asks for its placement once: a copy of its ScheduleRequest (a duplicate, or one held
// on the way) is refused, also after the request ended, when a placement would hold a prefill
// job and decode memory in the conductor's view that no report would ever take off.
TEST(conductor, a_copy_of_a_placement_places_nothing) {
  conductor_harness h;
  ASSERT_GT(h.schedule(1), 0u);
  const uint64_t one = h.predicted_queue_ns();
  auto copy = make_envelope<wire::ScheduleRequest>([](wire::ScheduleRequest::Builder out) {
    out.setRequestId(1);
    out.setPromptTokens(64);
    out.setMaxNewTokens(8);
  });
  auto again = h.ask(h.client, schedule_atom::value, copy);
  ASSERT_FALSE(again);
  EXPECT_TRUE(is(again.error(), errc::already_exists)) << describe(again.error());
  EXPECT_EQ(h.predicted_queue_ns(), one) << "while it is in flight";
  h.report(1, 0, 64'000);
  EXPECT_EQ(h.predicted_queue_ns(), 0u);
  again = h.ask(h.client, schedule_atom::value, copy);
  ASSERT_FALSE(again);
  EXPECT_TRUE(is(again.error(), errc::already_exists)) << describe(again.error());
  EXPECT_EQ(h.predicted_queue_ns(), 0u) << "after it ended: no job that nobody reports";
  EXPECT_GT(h.schedule(2), 0u) << "another request is placed as before";
}

// A request placed again after a failed attempt (request_retries_max) names that attempt's
// instances: the placement takes others, refuses when none is left, and refuses a name that is
// no instance as a bad message.
TEST(conductor, a_request_placed_again_avoids_the_instances_of_its_failed_attempt) {
  conductor_harness h(true);
  for (uint32_t p = 0; p < 2; ++p)
    for (uint32_t d = 0; d < 2; ++d) {
      const uint64_t id = 10 + 2 * p + d;
      const auto placed = h.place(id, {p}, {d});
      ASSERT_GT(placed.ttft_ns, 0u) << "avoiding prefill " << p << ", decode " << d;
      EXPECT_EQ(placed.prefill, 1 - p);
      EXPECT_EQ(placed.decode, 1 - d);
      h.report_job(id, 0, 64'000, placed.prefill, placed.prefill == 0 ? 0 : 2);
      h.end(id);
    }
  EXPECT_EQ(h.place(20, {0, 1}).ttft_ns, 0u) << "no prefill instance left";
  EXPECT_EQ(h.place(21, {}, {1, 0}).ttft_ns, 0u) << "no decode instance left";
  for (const auto& [prefill, decode] :
       {std::pair<std::vector<uint32_t>, std::vector<uint32_t>>{{2}, {}}, {{}, {7}}}) {
    auto r = h.ask(h.client, schedule_atom::value, h.schedule_msg(22, prefill, decode));
    ASSERT_FALSE(r);
    EXPECT_TRUE(is(r.error(), errc::invalid_argument)) << describe(r.error());
  }
  EXPECT_GT(h.place(23).ttft_ns, 0u) << "and places as before";
}

TEST(conductor, its_stats_give_each_prefill_instance_s_predicted_queue_time) {
  conductor_harness h;
  EXPECT_EQ(h.predicted_queue_ns(), 0u);
  // Two jobs of the same cost placed on the one instance (the virtual clock stands still): the
  // queue is one job's predicted time, then two.
  ASSERT_GT(h.schedule(1), 0u);
  const uint64_t one = h.predicted_queue_ns();
  EXPECT_GT(one, 0u);
  ASSERT_GT(h.schedule(2), 0u);
  EXPECT_EQ(h.predicted_queue_ns(), 2 * one);
  // Each job that ends takes its time off: the one left runs from now.
  h.report(1, 0, 64'000);
  EXPECT_EQ(h.predicted_queue_ns(), one);
  h.report(2, 0, 64'000);
  EXPECT_EQ(h.predicted_queue_ns(), 0u);
}

TEST(conductor, a_decode_instance_with_a_hand_off_arriving_at_once_gives_way_within_the_slack) {
  for (const double slack : {0.0, 0.1}) {
    conductor_harness h{true, slack};
    // Request 1 on prefill 0 and decode 0. Request 10 on the idle prefill 1 and decode 1; its
    // KV has landed (its job reported) though it still decodes there.
    const auto one = h.place(1);
    ASSERT_GT(one.ttft_ns, 0u);
    EXPECT_EQ(one.decode, 0u);
    const auto ten = h.place(10);
    EXPECT_EQ(ten.prefill, 1u);
    EXPECT_EQ(ten.decode, 1u);
    h.report_job(10, 0, 64'000, 1, 2);
    // Request 2 on prefill 1 again: its hand-off comes when request 1's does. Both decode
    // instances hold one request (the same TBT with it): by TBT alone the first, within the
    // slack the one no other hand-off crowds.
    const auto two = h.place(2);
    EXPECT_EQ(two.prefill, 1u);
    EXPECT_EQ(two.ttft_ns, one.ttft_ns);
    EXPECT_EQ(two.decode, slack > 0 ? 1u : 0u) << "slack " << slack;
  }
}

} // namespace
} // namespace crescent::testing
