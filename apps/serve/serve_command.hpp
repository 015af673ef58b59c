// `crescent serve`: a cluster (embedded, or with nodes in `crescent node` processes started
// beforehand, as `crescent run` has them, or started by serve itself with --launch, as
// `crescent up` starts them) behind an OpenAI-compatible HTTP API (docs/serve.md).
#pragma once

#include "apps/serve/front_door.hpp"

#include <cstdint>
#include <string>

namespace crescent::cli {

struct serve_options {
  std::string config_path;               // empty: built-in defaults
  std::string listen = "127.0.0.1:8000"; // HOST:PORT; port 0: any free port
  serve::door_options door;
  uint32_t connections_max = 1024; // HTTP connections served at once (one thread each)
  /// Requests on one kept-alive connection before the server closes it (the last answer says
  /// Connection: close); an idle one is closed after 5 s (cpp-httplib's default).
  static constexpr size_t keep_alive_requests_max = 1000;
  // Start the config's node processes (those with an address) as crescent up does, their logs
  // in a directory of their own (printed), and stop them when serving ends.
  bool launch = false;
  bool verbose = false;
};

/// Serves until SIGINT or SIGTERM; returns 0 then. 2: it could not start (bad config or
/// address, bring-up error, the port taken). Prints "listening on http://HOST:PORT" once ready.
int serve_command(const serve_options& opt);

} // namespace crescent::cli
