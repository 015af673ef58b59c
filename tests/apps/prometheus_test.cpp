// The Prometheus text of `crescent serve`'s /metrics: families, escaping, histograms.
#include "apps/serve/metrics.hpp"

#include <gtest/gtest.h>

namespace crescent::serve {
namespace {

void expect_lines(const std::string& text, std::initializer_list<const char*> lines) {
  for (const char* line : lines)
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
}

TEST(prometheus, a_family_has_help_type_and_escaped_labels) {
  prom_writer w;
  w.family("x_total", "counter", "Things");
  w.sample("x_total", {{"path", "a\"b\\c\nd"}}, 3);
  w.sample("x_total", {}, 0.5);
  EXPECT_EQ(w.take(), "# HELP x_total Things\n# TYPE x_total counter\n"
                      "x_total{path=\"a\\\"b\\\\c\\nd\"} 3\nx_total 0.5\n");
}

TEST(prometheus, histogram_buckets_are_cumulative_and_end_with_inf) {
  histogram h{{0.1, 1}};
  h.observe(0.05);
  h.observe(0.1); // on a bound: in that bucket (le)
  h.observe(0.5);
  h.observe(7);
  prom_writer w;
  h.write(w, "t_seconds", "T");
  EXPECT_EQ(w.take(), "# HELP t_seconds T\n# TYPE t_seconds histogram\n"
                      "t_seconds_bucket{le=\"0.1\"} 2\nt_seconds_bucket{le=\"1\"} 3\n"
                      "t_seconds_bucket{le=\"+Inf\"} 4\nt_seconds_sum 7.65\nt_seconds_count 4\n");
}

TEST(prometheus, the_door_counts_outcomes_answers_and_tokens) {
  door_metrics m;
  m.outcome(door_outcome::completed);
  m.outcome(door_outcome::rejected);
  m.http_answer("/v1/completions", 200);
  m.http_answer("/v1/completions", 200);
  m.http_answer("/v1/completions", 429);
  replay::request_result r;
  r.prompt_tokens = 10;
  r.reused_tokens = 8;
  r.remote_reused_tokens = 3;
  r.ssd_reused_tokens = 2;
  r.tokens = {1, 2, 3};
  r.arrival_ns = 0;
  r.token_times_ns = {2'000'000, 3'000'000, 5'000'000};
  m.observe(r);
  prom_writer w;
  m.write(w);
  expect_lines(w.take(),
               {"crescent_requests_total{outcome=\"completed\"} 1\n",
                "crescent_requests_total{outcome=\"rejected\"} 1\n",
                "crescent_http_responses_total{path=\"/v1/completions\",code=\"200\"} 2\n",
                "crescent_http_responses_total{path=\"/v1/completions\",code=\"429\"} 1\n",
                "crescent_ttft_seconds_count 1\n", "crescent_tbt_seconds_count 2\n",
                "crescent_prefix_hit_tokens_total{tier=\"local\"} 3\n",
                "crescent_prefix_hit_tokens_total{tier=\"remote\"} 3\n",
                "crescent_prefix_hit_tokens_total{tier=\"ssd\"} 2\n",
                "crescent_completion_tokens_total 3\n"});
}

TEST(prometheus, recent_quantiles_are_over_the_last_requests_and_sum_and_count_over_all) {
  door_metrics m;
  // 300 requests with TTFTs 1..300 ms: the quantiles see the last 256 (45..300 ms).
  for (int i = 1; i <= 300; ++i) {
    replay::request_result r;
    r.arrival_ns = 0;
    r.token_times_ns = {i * 1'000'000, i * 1'000'000 + 2'000'000};
    m.observe(r);
  }
  const auto n = m.numbers();
  EXPECT_EQ(n.ttft.recent.count, recent_requests);
  EXPECT_DOUBLE_EQ(n.ttft.recent.p50, 0.172); // rank 128 of 45..300 ms
  EXPECT_DOUBLE_EQ(n.ttft.recent.p99, 0.298); // rank ceil(0.99 * 256) = 254
  EXPECT_EQ(n.ttft.count, 300u);
  EXPECT_NEAR(n.ttft.sum, 300 * 301 / 2 / 1e3, 1e-9);
  EXPECT_DOUBLE_EQ(n.tbt.recent.p99, 0.002);
  prom_writer w;
  m.write(w);
  expect_lines(w.take(), {"# TYPE crescent_recent_ttft_seconds summary\n",
                          "crescent_recent_ttft_seconds{quantile=\"0.5\"} 0.172\n",
                          "crescent_recent_ttft_seconds{quantile=\"0.99\"} 0.298\n",
                          "crescent_recent_ttft_seconds_count 300\n",
                          "crescent_recent_tbt_seconds_count 300\n"});
}

TEST(prometheus, the_front_doors_share_is_one_summary_per_phase_out_only_for_streams) {
  door_metrics m;
  m.observe_door(0.0002, 0.0004);
  m.observe_door(0.0006, -1.0); // not streamed: no first event
  m.observe_door(0.0004, 0.0001);
  const auto n = m.numbers();
  EXPECT_EQ(n.door_in.count, 3u);
  EXPECT_EQ(n.door_out.count, 2u);
  EXPECT_DOUBLE_EQ(n.door_in.recent.p50, 0.0004);
  EXPECT_DOUBLE_EQ(n.door_out.recent.p99, 0.0004);
  EXPECT_NEAR(n.door_in.sum, 0.0012, 1e-12);
  prom_writer w;
  m.write(w);
  expect_lines(w.take(),
               {"# TYPE crescent_recent_front_door_seconds summary\n",
                "crescent_recent_front_door_seconds{phase=\"in\",quantile=\"0.5\"} 0.0004\n",
                "crescent_recent_front_door_seconds_count{phase=\"in\"} 3\n",
                "crescent_recent_front_door_seconds{phase=\"out\",quantile=\"0.99\"} 0.0004\n",
                "crescent_recent_front_door_seconds_count{phase=\"out\"} 2\n"});
}

} // namespace
} // namespace crescent::serve
