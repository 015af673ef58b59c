// The Prometheus text of `crescent serve`'s /metrics: families, escaping, histograms.
#include "apps/serve/metrics.hpp"

#include <gtest/gtest.h>

namespace crescent::serve {
namespace {

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
  r.tokens = {1, 2, 3};
  r.arrival_ns = 0;
  r.token_times_ns = {2'000'000, 3'000'000, 5'000'000};
  m.observe(r);
  prom_writer w;
  m.write(w);
  const auto text = w.take();
  for (const char* line :
       {"crescent_requests_total{outcome=\"completed\"} 1\n",
        "crescent_requests_total{outcome=\"rejected\"} 1\n",
        "crescent_http_responses_total{path=\"/v1/completions\",code=\"200\"} 2\n",
        "crescent_http_responses_total{path=\"/v1/completions\",code=\"429\"} 1\n",
        "crescent_ttft_seconds_count 1\n", "crescent_tbt_seconds_count 2\n",
        "crescent_prefix_hit_tokens_total{tier=\"local\"} 5\n",
        "crescent_prefix_hit_tokens_total{tier=\"remote\"} 3\n",
        "crescent_completion_tokens_total 3\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
}

} // namespace
} // namespace crescent::serve
