// A small cluster (one prefill, one decode instance) in simulated time gives exactly the same
// tokens and the same virtual timestamps on every run, on every machine of this kind.
#include "support/test_cluster.hpp"

namespace crescent::testing {
namespace {

replay::trace_record record(std::vector<uint64_t> ids, uint32_t input, uint32_t output,
                            uint64_t timestamp_ms) {
  replay::trace_record r;
  r.timestamp_ms = timestamp_ms;
  r.input_tokens = input;
  r.output_tokens = output;
  r.hash_ids = std::move(ids);
  return r;
}

std::vector<replay::request_result> run_small() {
  cluster_harness h{small_cluster(1, 1)};
  auto w = h.workload();
  std::vector<replay::synthetic_request> reqs{
      replay::synthesize(record({1, 2, 3}, 1500, 6, 0), 0, w),
      replay::synthesize(record({1, 2, 7}, 1400, 5, 2), 1, w),
      replay::synthesize(record({8}, 300, 4, 3), 2, w)};
  return h.replay(reqs);
}

std::vector<int64_t> relative_times(const replay::request_result& r) {
  std::vector<int64_t> out;
  for (auto t : r.token_times_ns)
    out.push_back(t - r.arrival_ns);
  return out;
}

TEST(determinism, one_prefill_one_decode_in_simulated_time) {
  auto a = run_small();
  auto b = run_small();
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].status, replay::outcome_status::completed) << a[i].reason;
    EXPECT_EQ(a[i].tokens, b[i].tokens);
    EXPECT_EQ(a[i].token_times_ns, b[i].token_times_ns);
    EXPECT_EQ(a[i].arrival_ns, b[i].arrival_ns);
  }
  // Pinned: the reference engine's arithmetic is order-fixed and uses no libm, and modeled
  // time is flops over a fixed rate, so these hold on every machine. If the engine changes on
  // purpose, print the new values and update them here.
  EXPECT_EQ(a[0].tokens, (std::vector<uint32_t>{116, 6, 239, 140, 132, 86}));
  EXPECT_EQ(a[1].tokens, (std::vector<uint32_t>{161, 126, 186, 173, 81}));
  EXPECT_EQ(a[2].tokens, (std::vector<uint32_t>{185, 158, 254, 120}));
  EXPECT_EQ(relative_times(a[0]),
            (std::vector<int64_t>{463668, 475752, 487861, 499996, 512156, 524342}));
  EXPECT_EQ(relative_times(a[1]), (std::vector<int64_t>{124058, 136065, 148097, 160155, 172239}));
  EXPECT_EQ(relative_times(a[2]), (std::vector<int64_t>{95207, 106343, 117505, 128693}));
  EXPECT_EQ(a[0].computed_tokens, 47u);
  EXPECT_EQ(a[1].reused_tokens, 32u);
  EXPECT_EQ(a[1].computed_tokens, 12u);
  EXPECT_EQ(a[2].computed_tokens, 10u);
}

} // namespace
} // namespace crescent::testing
