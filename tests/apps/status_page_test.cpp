// The status page's HTML (apps/serve/status_page.hpp) without a server or a browser: every
// number it carries is the value /metrics writes for the same series from the same numbers.
// tests/system/status_page_test.cpp loads it from a running server in Chromium.
#include "actors/cluster/cluster_config.hpp"
#include "apps/serve/status_page.hpp"
#include "support/html_text.hpp"

#include <gtest/gtest.h>

#include <regex>

namespace crescent::serve {
namespace {

TEST(status_page_html, escapes_text_and_attributes) {
  EXPECT_EQ(html_escape("<a href=\"x\">Tom & 'Jerry'</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
}

TEST(status_page_html, every_number_is_the_metrics_value_of_its_series) {
  door_metrics door;
  door.outcome(door_outcome::completed);
  door.outcome(door_outcome::rejected);
  replay::request_result r;
  r.prompt_tokens = 40;
  r.reused_tokens = 16;
  r.remote_reused_tokens = 4;
  r.computed_tokens = 24;
  r.tokens = {1, 2, 3};
  r.token_times_ns = {1'500'000, 2'000'000, 2'250'000};
  door.observe(r);

  cluster_config cfg; // 4 nodes: prefill on 0 and 1, decode on 2 and 3
  cluster_numbers c;
  c.conductor = conductor_numbers{7, 1, 0, 4, {2, 0}, {1, 0}, {0.25, 0}};
  c.store_master = store_numbers{};
  for (uint32_t n = 0; n < 4; ++n)
    c.owners.push_back({n, 64 << 20, n * 4096, 0, 0, n, 0, 0, 0, 0, 0, 0});
  c.workers.push_back({"prefill", 0, 0, 2, 1, 0, 0, 1'250'000'000, 0});
  c.workers.push_back({"prefill", 1, 1, 0, 0, 0, 0, 0, 0});
  c.workers.push_back({"decode", 0, 2, 0, 1, 900, 0, 3'000'000, 0});
  c.workers.push_back({"decode", 1, 3, 0, 0, 1000, 0, 0, 0});

  prom_writer w;
  door.write(w);
  write_cluster_metrics(w, c);
  const auto metrics = w.take();
  const auto page = status_page({"m<odel>", &cfg, door.numbers(), c});

  const std::regex number{R"re(data-series="([^"]*)" data-value="([^"]*)")re"};
  size_t checked = 0;
  for (std::sregex_iterator it{page.begin(), page.end(), number}, end; it != end; ++it) {
    const auto line =
        testing::html_unescape((*it)[1]) + " " + testing::html_unescape((*it)[2]) + "\n";
    EXPECT_NE(metrics.find("\n" + line), std::string::npos) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 6u + 5 + 6 + 3 + 4 * 4 + 7 * 4 + 2); // the last: predicted queues
  EXPECT_NE(page.find("id=\"hit-rate\" data-value=\"0.4\">40.0%"), std::string::npos) << page;
  EXPECT_NE(page.find("m&lt;odel&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos); // self-contained, no script
  EXPECT_EQ(page.find("src="), std::string::npos);    // and no external asset
}

TEST(status_page_html, says_which_actors_did_not_answer) {
  cluster_config cfg;
  cluster_numbers c;
  c.unanswered = 6;
  const auto page = status_page({"m", &cfg, door_numbers{}, c});
  EXPECT_NE(page.find("The conductor did not answer in time."), std::string::npos);
  EXPECT_NE(page.find("6 actors did not answer in time"), std::string::npos);
  EXPECT_NE(page.find("its block owner did not answer"), std::string::npos);
}

} // namespace
} // namespace crescent::serve
