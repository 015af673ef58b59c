// A real Prometheus server (Debian's `prometheus`) scraping a running `crescent serve` on
// loopback: its generated configuration in a temporary directory, the target up, and crescent
// series queried back through Prometheus's HTTP API. Labelled slow (Prometheus takes seconds to
// start and scrapes once a second); skipped when the binary is not installed.
#include "support/ports.hpp"
#include "support/serve_child.hpp"
#include "support/temp_dir.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace crescent::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Where `program` is on the PATH (empty: nowhere).
std::string on_path(const std::string& program) {
  std::string out;
  if (FILE* p = popen(("command -v " + program + " 2>/dev/null").c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), p))
      out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in{p};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Asks Prometheus (`api`) at most every 250 ms until `done` holds for its JSON answer to `path`,
// at most `timeout`; the last answer.
template <class Done>
json ask_until(httplib::Client& api, const std::string& path, Done done,
               std::chrono::seconds timeout) {
  json last;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto r = api.Get(path.c_str()); r && r->status == 200) {
      last = json::parse(r->body, nullptr, false);
      if (!last.is_discarded() && done(last))
        return last;
    }
    std::this_thread::sleep_for(250ms); // polling another process: nothing to wait on instead
  }
  return last;
}

TEST(prometheus_server, scrapes_crescent_serve_and_answers_queries_of_its_series) {
  const auto binary = on_path("prometheus");
  if (binary.empty())
    GTEST_SKIP() << "the prometheus binary is not installed (Debian's prometheus package; "
                    "tools/setup.sh installs it)";
  temp_dir tmp{"prometheus"};
  const auto& dir = tmp.path;
  {
    serve_child serve;
    ASSERT_GT(serve.port, 0);
    auto done =
        serve.client().Post("/v1/completions", completion_body("Once upon a time", 8, false).dump(),
                            "application/json");
    ASSERT_TRUE(done);
    ASSERT_EQ(done->status, 200) << done->body;

    std::ofstream{dir / "prometheus.yml"}
        << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
           "scrape_configs:\n  - job_name: crescent\n    static_configs:\n"
           "      - targets: ['127.0.0.1:"
        << serve.port << "']\n";
    const int port = unused_port();
    auto prom =
        bench::child_process::spawn(binary,
                                    {"--config.file=" + (dir / "prometheus.yml").string(),
                                     "--storage.tsdb.path=" + (dir / "data").string(),
                                     "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                                    (dir / "prometheus.log").string());
    ASSERT_TRUE(prom) << describe(prom.error());
    httplib::Client api{"127.0.0.1", port};
    api.set_read_timeout(5, 0);

    // The target is up once Prometheus has scraped /metrics well.
    auto targets = ask_until(
        api, "/api/v1/targets",
        [](const json& j) {
          const auto& active = j["data"]["activeTargets"];
          return active.size() == 1 && active[0]["health"] == "up";
        },
        60s);
    ASSERT_EQ(targets["data"]["activeTargets"].size(), 1u) << targets.dump() << "\n"
                                                           << file_text(dir / "prometheus.log");
    EXPECT_EQ(targets["data"]["activeTargets"][0]["health"], "up")
        << targets.dump() << "\n"
        << file_text(dir / "prometheus.log");

    // The completed request, as Prometheus stored it; and the conductor's predicted queue time
    // of each prefill instance (the embedded cluster has two).
    auto completed = ask_until(
        api, "/api/v1/query?query=crescent_requests_total%7Boutcome%3D%22completed%22%7D",
        [](const json& j) { return j["data"]["result"].size() == 1; }, 30s);
    ASSERT_EQ(completed["data"]["result"].size(), 1u) << completed.dump();
    const auto& sample = completed["data"]["result"][0];
    EXPECT_EQ(sample["metric"]["job"], "crescent");
    EXPECT_EQ(sample["value"][1], "1");
    auto queues = ask_until(
        api, "/api/v1/query?query=crescent_conductor_prefill_queue_seconds",
        [](const json& j) { return j["data"]["result"].size() == 2; }, 30s);
    EXPECT_EQ(queues["data"]["result"].size(), 2u) << queues.dump();

    prom->signal(SIGTERM);
    auto status = prom->wait_exit(30s);
    EXPECT_TRUE(status && *status == 0) << file_text(dir / "prometheus.log");
  }
}

} // namespace
} // namespace crescent::testing
