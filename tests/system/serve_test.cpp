// `crescent serve` for real: the binary listening on loopback, asked over HTTP. Every endpoint,
// streaming, the 400/404/413/429 answers, 503 for requests that fail (their decode node killed,
// their deadline passed), a client that goes away cancelling its request, and /metrics checked
// by Prometheus's promtool.
#include "apps/serve/openai.hpp"
#include "support/node_child.hpp"
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

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace crescent::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

using server = serve_child;

// The events of a server-sent event stream: each "data: " payload.
std::vector<std::string> events_of(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const auto end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

class serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shared = new server({"--body-bytes-max", "4096"}); }
  static void TearDownTestSuite() {
    delete shared;
    shared = nullptr;
  }
  static server* shared;
};
server* serve::shared = nullptr;

TEST_F(serve, lists_its_model) {
  auto r = shared->client().Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "crescent-reference");
}

TEST_F(serve, a_streamed_completion_has_the_same_text_as_a_whole_one) {
  auto c = shared->client();
  auto whole = c.Post("/v1/completions", completion_body("Once upon a time", 24, false).dump(),
                      "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  auto answer = json::parse(whole->body);
  EXPECT_EQ(answer["usage"]["completion_tokens"], 24);
  EXPECT_EQ(answer["usage"]["prompt_tokens"], 16);
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");

  auto streamed = c.Post("/v1/completions", completion_body("Once upon a time", 24, true).dump(),
                         "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  auto events = events_of(streamed->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, answer["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "length");
}

TEST_F(serve, the_front_door_counts_its_own_share_of_each_completions_ttft) {
  auto c = shared->client();
  auto before = c.Get("/metrics");
  ASSERT_TRUE(before);
  auto count = [](const std::string& text, const char* phase) {
    return metric(text,
                  std::string{"crescent_recent_front_door_seconds_count{phase=\""} + phase + "\"}");
  };
  for (bool stream : {false, true}) {
    auto r = c.Post("/v1/completions", completion_body("Once upon a time", 4, stream).dump(),
                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  auto after = c.Get("/metrics");
  ASSERT_TRUE(after);
  const auto& text = after->body;
  // Both ran to their end; only the streamed one wrote a first event.
  EXPECT_EQ(count(text, "in"), count(before->body, "in") + 2) << text;
  EXPECT_EQ(count(text, "out"), count(before->body, "out") + 1) << text;
  for (const char* phase : {"in", "out"}) {
    const double p50 = metric(text, std::string{"crescent_recent_front_door_seconds{phase=\""} +
                                        phase + "\",quantile=\"0.5\"}");
    EXPECT_GT(p50, 0.0) << phase; // each takes at least a message between threads
    EXPECT_LT(p50, 10.0) << phase;
  }
}

TEST_F(serve, a_stream_that_asks_for_its_timing_ends_with_them_in_a_comment) {
  auto c = shared->client();
  const auto body = completion_body("Once upon a time", 4, true).dump();
  auto asked =
      c.Post("/v1/completions", {{crescent::serve::timing_header, "1"}}, body, "application/json");
  ASSERT_TRUE(asked);
  ASSERT_EQ(asked->status, 200) << asked->body;
  // One comment, right before [DONE]; a client that ignores comments sees the plain stream.
  const auto done = asked->body.rfind("data: [DONE]\n\n");
  ASSERT_NE(done, std::string::npos) << asked->body;
  const auto line_end = asked->body.rfind("\n\n", done - 1);
  const auto line_start = asked->body.rfind("\n\n", line_end - 1) + 2;
  auto timing = crescent::serve::parse_timing_comment(
      std::string_view{asked->body}.substr(line_start, line_end - line_start));
  ASSERT_TRUE(timing) << asked->body;
  // In the order they happen, on the steady clock of the test's own process too.
  EXPECT_GT(timing->handler_ns, 0);
  EXPECT_LE(timing->handler_ns, timing->arrival_ns);
  EXPECT_LT(timing->arrival_ns, timing->first_token_ns);
  EXPECT_LE(timing->first_token_ns, timing->first_event_ns);
  EXPECT_LT(timing->first_event_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
  EXPECT_EQ(events_of(asked->body).back(), "[DONE]");

  auto plain = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  EXPECT_EQ(plain->body.find("crescent-timing"), std::string::npos) << plain->body;
}

TEST_F(serve, a_streamed_chat_ends_with_its_usage_and_done) {
  json body = {{"model", "crescent-reference"},
               {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
               {"max_tokens", 6},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  auto r = shared->client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto events = events_of(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events.front())["choices"][0]["delta"]["role"], "assistant");
  auto usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
}

TEST_F(serve, bad_requests_get_400_404_and_413_with_openai_error_bodies) {
  auto c = shared->client();
  auto hot = completion_body("x", 4, false);
  hot["temperature"] = 0.8;
  auto r = c.Post("/v1/completions", hot.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "temperature");

  r = c.Post("/v1/completions", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);

  auto other = completion_body("x", 4, false);
  other["model"] = "gpt-4o";
  r = c.Post("/v1/completions", other.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");

  r = c.Get("/v2/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(json::parse(r->body).contains("error"));

  r = c.Post("/v1/completions", completion_body(std::string(8000, 'a'), 4, false).dump(),
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
}

// Writes a streamed request on a raw socket, reads its first event, and closes the socket.
void stream_and_hang_up(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const auto body = completion_body("Tell me everything", 6000, true).dump();
  const auto head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    "application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n";
  const auto request = head + body;
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const auto n = read(fd, buf, sizeof(buf));
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
  close(fd);
}

TEST_F(serve, a_client_that_hangs_up_cancels_its_request_and_frees_its_decode_memory) {
  auto c = shared->client();
  auto before = c.Get("/metrics");
  ASSERT_TRUE(before);
  const double cancelled = metric(before->body, "crescent_requests_total{outcome=\"cancelled\"}");
  stream_and_hang_up(shared->port);
  // The server notices within its client check interval (50 ms); wait for it, up to 20 s.
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    text = r->body;
    if (metric(text, "crescent_requests_total{outcome=\"cancelled\"}") == cancelled + 1 &&
        metric(text, "crescent_requests_in_flight") == 0 &&
        metric(text, "crescent_instance_active_requests{role=\"decode\",instance=\"0\"}") == 0 &&
        metric(text, "crescent_instance_active_requests{role=\"decode\",instance=\"1\"}") == 0)
      break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << text;
    std::this_thread::sleep_for(20ms); // polling another process: nothing to wait on instead
  }
  // Cancelled long before its 6,000 tokens: nothing completed it.
  EXPECT_EQ(metric(text, "crescent_completion_tokens_total") <
                metric(before->body, "crescent_completion_tokens_total") + 6000,
            true);
}

TEST_F(serve, a_kept_alive_connection_carries_one_streamed_completion_after_another) {
  // As a client with a connection pool sends: more requests on one connection than
  // cpp-httplib's default of 5 before it closes, each answer whole and none saying close.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  timeval limit{30, 0}; // a server that stops answering fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(shared->port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const auto body = completion_body("Once upon a time", 2, true).dump();
  const auto request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                       "application/json\r\nConnection: keep-alive\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()))
        << "request " << i;
    std::string got;
    char buf[4096];
    while (got.find("\r\n0\r\n\r\n") == std::string::npos) { // the last chunk
      const auto n = read(fd, buf, sizeof(buf));
      ASSERT_GT(n, 0) << "request " << i << ": " << got;
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
    EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << got;
    std::string head = got.substr(0, got.find("\r\n\r\n"));
    std::transform(head.begin(), head.end(), head.begin(), ::tolower);
    EXPECT_EQ(head.find("connection: close"), std::string::npos) << "request " << i << ": " << head;
  }
  close(fd);
}

TEST_F(serve, metrics_pass_promtool) {
  auto r = shared->client().Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("crescent_ttft_seconds_bucket"), std::string::npos);
  EXPECT_NE(r->body.find("crescent_pool_capacity_bytes{node=\"0\",tier=\"dram\"}"),
            std::string::npos);
  EXPECT_NE(r->body.find("\ncrescent_conductor_prefill_queue_seconds{instance=\"1\"} "),
            std::string::npos);
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package; tools/setup.sh "
                    "installs it)";
  const auto path = std::filesystem::temp_directory_path() /
                    ("crescent-metrics-" + std::to_string(getpid()) + ".txt");
  std::ofstream{path} << r->body;
  const auto cmd =
      "promtool check metrics < " + path.string() + " > " + path.string() + ".out 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in{path.string() + ".out"};
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << out;
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".out");
}

TEST(serve_admission, a_request_the_conductor_rejects_is_429_with_retry_after) {
  temp_dir dir{"serve-tight"};
  // A TTFT SLO of 1 ms: a 6,000-token prompt cannot meet it, so admission rejects it.
  {
    server s{{"--config", dir.write("tight.yaml", "conductor:\n  slo: {ttft_ms: 1}\n")}};
    auto r =
        s.client().Post("/v1/completions", completion_body(std::string(6000, 'b'), 8, false).dump(),
                        "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << r->body;
    EXPECT_GE(std::atoi(r->get_header_value("Retry-After").c_str()), 1);
    auto e = json::parse(r->body)["error"];
    EXPECT_NE(e["message"].get<std::string>().find("SLO"), std::string::npos) << e;
    // Streamed, it is refused the same way, before any event.
    r = s.client().Post("/v1/completions", completion_body(std::string(6000, 'b'), 8, true).dump(),
                        "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << r->body;
  }
}

// A whole (not streamed) completion asked on a thread of its own: its status and body.
struct pending_answer {
  int status = 0;
  std::string body;
  std::thread thread;
  pending_answer(const server& s, nlohmann::json body_json)
      : thread([this, c = s.client(), b = body_json.dump()]() mutable {
          auto r = c.Post("/v1/completions", b, "application/json");
          if (r) {
            status = r->status;
            body = r->body;
          }
        }) {}
  void join() { thread.join(); }
};

// Node 1, the only decode instance, in a `crescent node` process; the prefill instance, the
// conductor and the store master in the server's. A model wider than the default one, so that
// 4,000 output tokens take seconds to decode.
std::string one_decode_node_yaml() {
  return "model: {layers: 4, d_model: 128, heads: 4, kv_heads: 2, ffn: 352, "
         "context_tokens_max: 4096}\n"
         "nodes:\n"
         "  - {prefill: 1, pool_mib: 4}\n"
         "  - {decode: 1, pool_mib: 4}\n"
         "decode: {kv_mib: 64, request_tokens_max: 4096}\n"
         "store: {sync_commits: false}\n"
         "conductor: {heartbeat_timeout_ms: 600}\n"
         "heartbeat_interval_ms: 100\n"
         "join_timeout_ms: 10000\n";
}

TEST(serve_failure, a_request_whose_decode_node_is_killed_answers_503_with_the_reason) {
  temp_dir dir{"serve-killed"};
  const auto yaml = one_decode_node_yaml();
  auto node = start_node_process(dir.write("node.yaml", yaml), 1);
  ASSERT_TRUE(node) << describe(node.error());
  auto served = yaml;
  const std::string decode_node = "  - {decode: 1, pool_mib: 4}";
  served.replace(served.find(decode_node), decode_node.size(),
                 "  - {decode: 1, pool_mib: 4, address: \"127.0.0.1:" + std::to_string(node->port) +
                     "\"}");
  server s{{"--config", dir.write("serve.yaml", served)}};
  ASSERT_GT(s.port, 0);
  pending_answer answer{s, completion_body("Tell me everything", 4000, false)};
  // Killed once the decode instance holds the request (its reservation, then its decode).
  auto c = s.client();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    if (metric(r->body, "crescent_instance_active_requests{role=\"decode\",instance=\"0\"}") == 1)
      break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << r->body;
    std::this_thread::sleep_for(5ms); // polling another process: nothing to wait on instead
  }
  node->process.kill();
  answer.join();
  EXPECT_EQ(answer.status, 503) << answer.body;
  auto e = json::parse(answer.body)["error"];
  EXPECT_EQ(e["type"], "server_error");
  EXPECT_NE(e["message"].get<std::string>().find("decode instance 0 stopped"), std::string::npos)
      << e;
  auto after = c.Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_EQ(metric(after->body, "crescent_requests_total{outcome=\"failed\"}"), 1);
  EXPECT_EQ(
      metric(after->body, "crescent_http_responses_total{path=\"/v1/completions\",code=\"503\"}"),
      1);
}

// The processes whose command line names `config` as a node's (from /proc).
std::vector<pid_t> node_processes_of(const std::string& config) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator{"/proc"}) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream in{entry.path() / "cmdline"};
    std::string line{std::istreambuf_iterator<char>(in), {}};
    std::replace(line.begin(), line.end(), '\0', ' ');
    if (line.find(" node --config " + config) != std::string::npos)
      out.push_back(std::stoi(name));
  }
  return out;
}

TEST(serve_launch, starts_the_node_processes_of_its_config_and_stops_them_at_the_end) {
  temp_dir dir{"serve-launch"};
  auto yaml = one_decode_node_yaml();
  const std::string decode_node = "  - {decode: 1, pool_mib: 4}";
  yaml.replace(
      yaml.find(decode_node), decode_node.size(),
      "  - {decode: 1, pool_mib: 4, address: \"127.0.0.1:" + std::to_string(unused_port()) + "\"}");
  const auto config = dir.write("serve.yaml", yaml);
  std::vector<pid_t> nodes;
  pid_t serve_pid = 0;
  {
    server s{{"--config", config, "--launch"}};
    ASSERT_GT(s.port, 0);
    serve_pid = s.process->pid();
    nodes = node_processes_of(config);
    EXPECT_EQ(nodes.size(), 1u) << "node 1's process, started by serve";
    auto r = s.client().Post("/v1/completions", completion_body("Hello", 4, false).dump(),
                             "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 4);
  } // SIGTERM: serve stops cleanly (serve_child checks its status), and its nodes with it
  for (auto pid : nodes)
    EXPECT_TRUE(kill(pid, 0) != 0 && errno == ESRCH) << "node process " << pid << " is left";
  EXPECT_TRUE(node_processes_of(config).empty());
  // Where serve put the node's log (it prints the directory, and leaves it for the user).
  const auto logs =
      std::filesystem::temp_directory_path() / ("crescent-serve-" + std::to_string(serve_pid));
  EXPECT_TRUE(std::filesystem::exists(logs / "node-1.log"));
  std::filesystem::remove_all(logs);
}

TEST(serve_failure, a_request_past_its_deadline_answers_503_with_the_reason) {
  temp_dir dir{"serve-deadline"};
  // A deadline of 1 ms: no request of 2,000 output tokens ends before it.
  server s{{"--config", dir.write("deadline.yaml", "request_deadline_ms: 1\n")}};
  auto r = s.client().Post("/v1/completions", completion_body("Once", 2000, false).dump(),
                           "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  auto e = json::parse(r->body)["error"];
  EXPECT_NE(e["message"].get<std::string>().find("deadline passed"), std::string::npos) << e;
}

} // namespace
} // namespace crescent::testing
