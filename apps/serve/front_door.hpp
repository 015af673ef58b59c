// The front door of `crescent serve` (docs/serve.md): the HTTP routes, each completion request
// becoming a request actor of the cluster.
//
// Every HTTP connection is served by one thread of cpp-httplib's pool; a completion's thread
// holds a scoped actor that runs the request actor (run, or stream with itself as the token
// listener) and waits for its tokens and its outcome. What a client sees:
//   - 200 with the completion (or, streamed, server-sent events from the first token on);
//   - 400 naming the field of a bad body, 404 for another model or path, 413 for a body over
//     body_bytes_max;
//   - 429 with Retry-After when the conductor rejects the request (admission: its SLOs cannot be
//     met), the reason in the error;
//   - 503 with the reason when the request fails (a node went away, the deadline passed), 504
//     when no outcome came in the request deadline and a margin.
// A client that goes away (its socket closes) cancels its request: the request actor fails it at
// once, releasing its decode reservation (docs/serve.md says what else is released when).
#pragma once

#include "apps/serve/metrics.hpp"
#include "apps/serve/openai.hpp"

#include <caf/actor_system.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace httplib {
class Server;
struct Request;
struct Response;
} // namespace httplib

namespace crescent {
class cluster;
}

namespace crescent::serve {

struct door_options {
  std::string model = "crescent-reference"; // the name /v1/models lists and bodies must use
  uint32_t max_tokens_default = 16;
  size_t body_bytes_max = 1 << 20;
  // How often a waiting request looks whether its client is still there.
  std::chrono::milliseconds client_check_interval{50};
  std::chrono::milliseconds scrape_timeout{1000}; // an actor's stats at /metrics
};

class front_door {
 public:
  front_door(caf::actor_system& sys, cluster& cl, door_options options);

  /// Registers the routes, the body limit and the JSON error bodies on `server`.
  void install(httplib::Server& server);

  door_metrics& metrics() { return metrics_; }

 private:
  void completion(api kind, const httplib::Request& req, httplib::Response& res);
  void models(httplib::Response& res) const;
  void prometheus(httplib::Response& res);
  void status(httplib::Response& res); // GET /: the status page (status_page.hpp)
  void answer_error(const http_error& e, httplib::Response& res);

  caf::actor_system& sys_;
  cluster& cl_;
  door_options options_;
  request_limits limits_;
  door_metrics metrics_;
  std::atomic<uint64_t> next_id_{1};
  int64_t started_s_ = 0;
};

} // namespace crescent::serve
