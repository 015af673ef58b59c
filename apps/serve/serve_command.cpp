#include "apps/serve/serve_command.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "apps/run_command.hpp"
#include "apps/up/node_launch.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace crescent::cli {

namespace {

int fail(const std::string& what) {
  fmt::print(stderr, "crescent serve: {}\n", what);
  return 2;
}

struct host_port {
  std::string host;
  int port = 0;
};

caf::expected<host_port> parse_listen(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return make_error(errc::invalid_argument,
                      fmt::format("--listen {}: expected HOST:PORT, as 127.0.0.1:8000", text));
  host_port out{text.substr(0, colon), 0};
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2); // [::1]:8000
  const auto port = text.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p < 0 || p > 65535)
    return make_error(errc::invalid_argument,
                      fmt::format("--listen {}: the port must be a number in [0, 65535]", text));
  out.port = static_cast<int>(p);
  return out;
}

// SIGINT and SIGTERM are taken by sigwait in the main thread: blocked here, before any other
// thread starts, so that every thread inherits the mask and none is interrupted.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// --launch: the config's node processes, started and ready, their logs in a new directory.
caf::expected<std::vector<up::node_process>> launch(const cluster_config& cfg,
                                                    const std::string& config_path) {
  if (config_path.empty() || !spans_processes(cfg))
    return make_error(errc::bad_config,
                      "--launch starts the node processes of a --config whose nodes have an "
                      "address; this cluster has none");
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("crescent-serve-" + std::to_string(getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return make_error(errc::io_error, dir.string() + ": " + ec.message());
  fmt::print(stderr, "crescent serve: node process logs in {}\n", dir.string());
  return up::launch_nodes(cfg, fs::absolute(config_path).string(), dir.string(),
                          std::chrono::milliseconds(cfg.join_timeout_ms));
}

} // namespace

int serve_command(const serve_options& opt) {
  spdlog::set_level(opt.verbose ? spdlog::level::info : spdlog::level::err);
  auto where = parse_listen(opt.listen);
  if (!where)
    return fail(describe(where.error()));
  if (opt.connections_max == 0 || opt.door.body_bytes_max == 0)
    return fail("--connections-max and --body-bytes-max must be positive");
  auto loaded = real_time_config(opt.config_path);
  if (!loaded)
    return fail(describe(loaded.error()));
  const auto cfg = std::move(*loaded);
  const auto stop_signals = block_stop_signals();
  std::vector<up::node_process> nodes;
  if (opt.launch) {
    auto started = launch(cfg, opt.config_path);
    if (!started)
      return fail(describe(started.error()));
    nodes = std::move(*started);
  }
  process_actor_system actors{spans_processes(cfg), connection_liveness_of(cfg)};
  auto& sys = actors.get();
  // Stopped on every way out, after the cluster (their agents see the conductor go) and before
  // the actor system ends (whose end could otherwise wait on actors their connections hold).
  struct stopper {
    std::vector<up::node_process>& nodes;
    ~stopper() { up::stop_nodes(nodes); }
  } stop_nodes_at_end{nodes};
  auto cl = cluster::start(sys, cfg);
  if (!cl)
    return fail("cluster bring-up: " + describe(cl.error()));
  int status = 0;
  {
    serve::front_door door{sys, **cl, opt.door};
    httplib::Server server;
    const auto threads = opt.connections_max;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_tcp_nodelay(true);
    // Clients with a connection pool (OpenAI's SDKs) send request after request on one
    // connection; cpp-httplib's default closes it after 5.
    server.set_keep_alive_max_count(serve_options::keep_alive_requests_max);
    door.install(server);
    int port = where->port;
    const bool bound = port == 0 ? (port = server.bind_to_any_port(where->host)) > 0
                                 : server.bind_to_port(where->host, port);
    if (!bound) {
      status = fail(
          fmt::format("cannot listen on {}: the address is taken or not this host's", opt.listen));
    } else {
      std::thread http{[&] { server.listen_after_bind(); }};
      const bool v6 = where->host.find(':') != std::string::npos;
      fmt::print("crescent serve: listening on http://{}{}{}:{} (model {}, {} nodes)\n",
                 v6 ? "[" : "", where->host, v6 ? "]" : "", port, opt.door.model, cfg.nodes.size());
      std::fflush(stdout);
      int sig = 0;
      sigwait(&stop_signals, &sig);
      fmt::print(stderr, "crescent serve: stopping (signal {})\n", sig);
      server.stop();
      http.join();
    }
  }
  (*cl)->stop();
  sys.await_all_actors_done();
  cl->reset();
  return status;
}

} // namespace crescent::cli
