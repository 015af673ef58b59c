// crescent bench faults, small: five runs of 12 requests on 4 node processes in network
// namespaces; each run ends every request and holds the invariants, and the table has a row
// for each fault with its added p99. About a minute, mostly waiting for runs to settle: slow.
#include "apps/bench/child_process.hpp"
#include "apps/up/netns.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace crescent::testing {
namespace {

TEST(bench_faults, every_run_ends_its_requests_and_the_table_has_each_fault) {
  if (auto why = up::netns_network::available())
    GTEST_SKIP() << describe(why);
  const auto out = std::filesystem::temp_directory_path() /
                   ("crescent-bench-faults-test-" + std::to_string(getpid()));
  auto p = bench::child_process::spawn(CRESCENT_BINARY,
                                       {"bench", "faults", "--trace", CRESCENT_TRACE, "--requests",
                                        "12", "--speedup", "8", "--out", out.string()});
  ASSERT_TRUE(p) << describe(p.error());
  std::string text;
  for (;;) {
    auto line = p->read_line(std::chrono::seconds(300));
    if (!line)
      break;
    text += *line + "\n";
  }
  auto status = p->wait_exit(std::chrono::seconds(60));
  ASSERT_TRUE(status) << describe(status.error());
  EXPECT_EQ(*status, 0) << text;
  for (const char* row : {"no faults", "kill -9 decode node 4", "SIGSTOP prefill node 2, 2 s",
                          "partition decode node 3, 2 s", "5% packet loss, nodes 2-3"})
    EXPECT_NE(text.find(std::string{row} + " "), std::string::npos) << row << "\n" << text;
  EXPECT_NE(text.find("hold the invariants: held"), std::string::npos) << text;
  std::filesystem::remove_all(out);
}

} // namespace
} // namespace crescent::testing
