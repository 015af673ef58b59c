// `crescent bench serve` with tiny sizes: every phase runs to its end and prints its figures
// against their targets. A smoke test: no timing is asserted (docs/benchmarks.md has the runs).
#include "apps/bench/child_process.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace crescent::testing {
namespace {

using namespace std::chrono_literals;

TEST(bench_serve, runs_every_phase_with_tiny_sizes_and_prints_the_ratio_lines) {
  auto p = bench::child_process::spawn(CRESCENT_BINARY,
                                       {"bench", "serve", "--trace", CRESCENT_TRACE, "--requests",
                                        "20", "--clients", "20", "--client-tokens", "400",
                                        "--hold-s", "0.2", "--overload-requests", "20"});
  ASSERT_TRUE(p) << describe(p.error());
  std::string out;
  for (;;) {
    auto line = p->read_line(240s);
    if (!line)
      break; // its output ended
    out += *line + "\n";
  }
  auto status = p->wait_exit(60s);
  ASSERT_TRUE(status) << out;
  EXPECT_EQ(*status, 0) << out;
  for (const char* expected :
       {"ratio         p50 TTFT HTTP / in-process: ", "(target <= 1.10: ",
        "difference    p99 TTFT HTTP - in-process: ", "(target <= 1 ms: ",
        "paired        the same 20 requests inside the server",
        "ratio         p50 TTFT HTTP / request actors: ",
        "difference    p99 TTFT HTTP - request actors: ", "added         per request, ",
        "20 streaming clients of 400 tokens: at most ", " held open at once",
        "(target < 200 MiB: ", "429 latency   ", "admitted TTFT ", "server RSS    peak "})
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\nin\n" << out;
  // Every request of the replay completed on both sides, over HTTP twice: a connection each,
  // then kept-alive connections, of which later requests took some (the first ones connect).
  const std::string completed = "  completed                         20          20\n";
  const auto first = out.find(completed);
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_NE(out.find(completed, first + 1), std::string::npos) << out;
  EXPECT_NE(out.find("over HTTP     a connection per request (Connection: close)"),
            std::string::npos)
      << out;
  const auto kept = out.find("over HTTP     kept-alive connections: ");
  ASSERT_NE(kept, std::string::npos) << out;
  EXPECT_GT(std::atoi(out.c_str() + kept + 38), 0) << "no request reused a connection\n" << out;
}

TEST(bench_serve, a_bad_flag_is_refused_with_the_reason) {
  const auto err = std::filesystem::temp_directory_path() /
                   ("crescent-bench-serve-flag-" + std::to_string(getpid()) + ".err");
  auto p = bench::child_process::spawn(CRESCENT_BINARY, {"bench", "serve", "--only", "everything"},
                                       err.string());
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(30s);
  ASSERT_TRUE(status);
  EXPECT_NE(*status, 0);
  std::ifstream in{err};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--only"), std::string::npos) << text;
  EXPECT_NE(text.find("everything"), std::string::npos) << text;
  std::filesystem::remove(err);
}

} // namespace
} // namespace crescent::testing
