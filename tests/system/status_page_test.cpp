// GET / of `crescent serve` in headless Chromium (Debian's chromium): the page loads, renders
// (a screenshot), and every number it shows is the value /metrics gives for the same series.
#include "support/html_text.hpp"
#include "support/serve_child.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace crescent::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// /metrics without the HTTP answer counts, which each scrape and page load changes.
std::string settled_part(const std::string& text) {
  std::string out;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("crescent_http_responses_total", 0) != 0)
      out += line + "\n";
  return out;
}

// Runs chromium headless with `args` and the page; its exit status.
int chromium(const fs::path& profile, const std::string& args, const std::string& url,
             const fs::path& out) {
  const auto cmd = "chromium --headless --no-sandbox --disable-gpu --no-first-run "
                   "--disable-extensions --user-data-dir=" +
                   profile.string() + " " + args + " " + url + " > " + out.string() + " 2> " +
                   out.string() + ".err";
  return std::system(cmd.c_str());
}

TEST(status_page, shows_in_chromium_the_numbers_of_metrics) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed (Debian's chromium package; tools/setup.sh "
                    "installs it)";
  serve_child s;
  ASSERT_GT(s.port, 0);
  auto c = s.client();
  // Traffic first, so that the numbers are not all zero: the same prompt twice (its second run
  // may reuse the first's blocks), a streamed one, and a refused one.
  for (int i = 0; i < 2; ++i) {
    auto r = c.Post("/v1/completions",
                    completion_body(std::string(200, 'a') + "Once upon a time", 12, false).dump(),
                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  auto r =
      c.Post("/v1/completions", completion_body("Hello there", 8, true).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  r = c.Post("/v1/completions", "{not json", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 400);

  // What a request sets off after its answer (storing its blocks) settles: two scrapes alike.
  std::string before;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    const auto now = settled_part(m->body);
    if (now == before && metric(m->body, "crescent_requests_in_flight") == 0)
      break;
    before = now;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the cluster does not settle";
    std::this_thread::sleep_for(200ms); // polling another process: nothing to wait on instead
  }

  const auto dir = fs::temp_directory_path() / ("crescent-status-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const auto url = "http://127.0.0.1:" + std::to_string(s.port) + "/";
  const fs::path shot = CRESCENT_STATUS_SCREENSHOT;
  fs::remove(shot);
  ASSERT_EQ(chromium(dir / "profile", "--window-size=1280,1000 --screenshot=" + shot.string(), url,
                     dir / "shot.out"),
            0)
      << read_file(dir / "shot.out.err");
  ASSERT_TRUE(fs::exists(shot)) << read_file(dir / "shot.out.err");
  const auto png = read_file(shot);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(png.size(), 10'000u) << "a blank page?";

  ASSERT_EQ(chromium(dir / "profile", "--dump-dom", url, dir / "dom.html"), 0)
      << read_file(dir / "dom.html.err");
  const auto dom = read_file(dir / "dom.html");
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  const auto metrics = m->body;
  EXPECT_EQ(settled_part(metrics), before) << "the cluster changed while the page loaded";

  // Every number of the page against /metrics, as written there.
  const std::regex number{R"re(data-series="([^"]*)" data-value="([^"]*)")re"};
  size_t checked = 0;
  for (std::sregex_iterator it{dom.begin(), dom.end(), number}, end; it != end; ++it) {
    const auto series = html_unescape((*it)[1]);
    const auto value = html_unescape((*it)[2]);
    auto expected = metric_text(metrics, series);
    ASSERT_TRUE(expected) << series << " is on the page but not in /metrics";
    EXPECT_EQ(value, *expected) << series;
    ++checked;
  }
  // The 5 outcomes and in flight, 5 hit counters (tiers local, remote, ssd), 6 recent latency
  // numbers, 3 conductor numbers, 4 per node (4 nodes) and 6 per instance (4 instances).
  EXPECT_EQ(checked, 6u + 5 + 6 + 3 + 4 * 4 + 7 * 4 + 2) << dom; // the last: predicted queues
  EXPECT_EQ(metric(metrics, "crescent_requests_total{outcome=\"completed\"}"), 3);
  EXPECT_EQ(metric(metrics, "crescent_requests_total{outcome=\"bad_request\"}"), 1);
  EXPECT_EQ(metric(metrics, "crescent_recent_ttft_seconds_count"), 3);

  // The hit rate, derived: hit tokens over prompt tokens.
  const std::regex hit{R"re(id="hit-rate" data-value="([^"]*)")re"};
  std::smatch h;
  ASSERT_TRUE(std::regex_search(dom, h, hit)) << dom;
  const double hits = metric(metrics, "crescent_prefix_hit_tokens_total{tier=\"local\"}") +
                      metric(metrics, "crescent_prefix_hit_tokens_total{tier=\"remote\"}");
  EXPECT_NEAR(std::atof(h[1].str().c_str()), hits / metric(metrics, "crescent_prompt_tokens_total"),
              1e-12);
  // The cluster's shape: every instance with its role.
  for (const char* row : {"<td>prefill</td><td>0</td>", "<td>prefill</td><td>1</td>",
                          "<td>decode</td><td>0</td>", "<td>decode</td><td>1</td>"})
    EXPECT_NE(dom.find(row), std::string::npos) << row;
  fs::remove_all(dir);
}

} // namespace
} // namespace crescent::testing
