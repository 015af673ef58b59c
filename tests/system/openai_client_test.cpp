// The official OpenAI client (the npm `openai` package at the version
// tests/clients/openai/package.json pins; tools/setup.sh installs it) calls a running
// `crescent serve`: its model list, a completion whole and streamed, a chat whole and streamed,
// and a refused request as the client's typed error. Skipped without Node.js or the package.
#include "apps/bench/child_process.hpp"
#include "support/serve_child.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace crescent::testing {
namespace {

TEST(openai_client, the_official_client_calls_crescent_serve_streaming_included) {
  const std::filesystem::path dir = CRESCENT_OPENAI_CLIENT_DIR;
  if (!std::filesystem::exists(dir / "node_modules" / "openai"))
    GTEST_SKIP() << "the openai package is not installed in " << dir
                 << " (tools/setup.sh installs it with npm)";
  if (!std::filesystem::exists("/usr/bin/node"))
    GTEST_SKIP() << "no Node.js at /usr/bin/node (Debian's nodejs)";
  serve_child server;
  ASSERT_GT(server.port, 0);
  const auto url = "http://127.0.0.1:" + std::to_string(server.port) + "/v1";
  auto p = bench::child_process::spawn("/usr/bin/node", {(dir / "check.mjs").string(), url});
  ASSERT_TRUE(p) << describe(p.error());
  auto line = p->read_line(std::chrono::seconds(120));
  auto status = p->wait_exit(std::chrono::seconds(30));
  ASSERT_TRUE(status) << describe(status.error());
  ASSERT_EQ(*status, 0) << "the client failed";
  ASSERT_TRUE(line) << describe(line.error());
  const auto out = nlohmann::json::parse(*line);
  EXPECT_EQ(out["models"][0], "crescent-reference");
  EXPECT_EQ(out["completion"]["usage"]["completion_tokens"], 8);
  EXPECT_EQ(out["completion"]["usage"]["prompt_tokens"], 19) << "one byte a token";
  EXPECT_FALSE(out["completion"]["text"].get<std::string>().empty());
  EXPECT_EQ(out["streamed_completion"], out["completion"]["text"])
      << "the stream, as the client assembles it, is the whole text";
  EXPECT_EQ(out["chat"]["role"], "assistant");
  EXPECT_EQ(out["streamed_chat"], out["chat"]["content"]);
  EXPECT_EQ(out["bad_request"]["status"], 400);
  EXPECT_NE(out["bad_request"]["message"].get<std::string>().find("temperature"), std::string::npos)
      << out["bad_request"];
}

} // namespace
} // namespace crescent::testing
