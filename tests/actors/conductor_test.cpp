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

class conductor_harness : public deterministic_system {
 public:
  conductor_harness() {
    conductor_options o;
    o.nodes = 2;
    o.prefill_node = {0};
    o.decode_node = {1};
    o.admission = admission_mode::none;
    o.block_tokens = 16;
    o.decode_capacity_tokens = 1'000'000;
    o.model = simple_model();
    conductor = spawn_conductor(sys, o);
  }

  // A 64-token prompt of 4 uncached blocks; its predicted TTFT (0: not placed).
  uint64_t schedule(uint64_t id) {
    auto msg = make_envelope<wire::ScheduleRequest>([&](wire::ScheduleRequest::Builder out) {
      out.setRequestId(id);
      out.setPromptTokens(64);
      out.setMaxNewTokens(8);
      auto keys = out.initBlockKeys(4);
      for (unsigned i = 0; i < 4; ++i)
        keys.set(i, 100 * id + i);
    });
    auto reply = ask(conductor, schedule_atom::value, msg);
    EXPECT_TRUE(reply);
    if (!reply)
      return 0;
    return *read_as<wire::ScheduleReply>(*reply, [](wire::ScheduleReply::Reader in) {
      return in.isPlaced() ? in.getPlaced().getPredictedTtftNs() : uint64_t{0};
    });
  }

  // The job ended having reused `reused` of its 64 tokens and computed the rest in `compute_ns`;
  // then the request ended.
  void report(uint64_t id, uint32_t reused, uint64_t compute_ns) {
    auto msg = make_envelope<wire::PrefillReport>([&](wire::PrefillReport::Builder out) {
      out.setRequestId(id);
      out.setInstance(0);
      out.setNode(0);
      out.setOk(true);
      out.setComputedTokens(64 - reused);
      out.setReusedTokens(reused);
      out.setComputeNs(compute_ns);
    });
    EXPECT_FALSE(ask_void(conductor, report_atom::value, msg));
    auto ended = make_envelope<wire::RequestReport>([&](wire::RequestReport::Builder out) {
      out.setRequestId(id);
      out.setCompleted(true);
    });
    EXPECT_FALSE(ask_void(conductor, finished_atom::value, ended));
  }

  conductor_actor conductor;
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

} // namespace
} // namespace crescent::testing
