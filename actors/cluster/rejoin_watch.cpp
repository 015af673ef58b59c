// The main process's watch over its hosted nodes: a node whose agent is gone (its process was
// killed, or ended when its connection closed) is taken back once a new process answers at its
// address (cluster::rejoin_node), looked for every rejoin_interval_ms.
#include "actors/cluster/cluster.hpp"
#include "messages/errors.hpp"

#include <caf/scoped_actor.hpp>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace crescent {

namespace {

using steady = std::chrono::steady_clock;

// How long the check that something listens at a node's address waits for an answer. CAF's
// connect blocks without a limit: behind a partition it would hold the watch for minutes.
constexpr int listen_check_ms = 200;

// Whether a TCP connection to `a` opens within listen_check_ms (it is closed at once).
bool listening(const node_address& a) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &found) != 0)
    return false;
  bool open = false;
  for (auto* ai = found; ai != nullptr && !open; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0)
      continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      open = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      open = poll(&p, 1, listen_check_ms) == 1 &&
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return open;
}

} // namespace

void cluster::start_rejoin_watch() {
  if (!spans_processes(cfg_) || cfg_.rejoin_interval_ms == 0 || watch_.joinable())
    return;
  watch_ = std::thread{[this] { watch_rejoins(); }};
}

void cluster::stop_rejoin_watch() {
  {
    std::lock_guard guard{watch_mutex_};
    watch_stopping_ = true;
  }
  watch_wake_.notify_all();
  if (watch_.joinable())
    watch_.join();
}

void cluster::watch_rejoins() {
  // Hidden: a blocking actor that await_all_actors_done must not wait for.
  caf::scoped_actor self{sys_, true};
  const auto nodes = static_cast<uint32_t>(cfg_.nodes.size());
  std::vector<caf::actor_addr> agents(nodes);
  std::vector<bool> lost(nodes, false);
  std::vector<std::string> last_error(nodes); // logged once until it changes
  auto watch = [&](uint32_t n) {
    const auto agent = cell_->current().node_agents[n];
    agents[n] = agent.address();
    self->monitor(agent); // a gone one answers at once
  };
  for (uint32_t n = 0; n < nodes; ++n)
    if (cfg_.nodes[n].hosted_elsewhere())
      watch(n);
  const auto interval = std::chrono::milliseconds(cfg_.rejoin_interval_ms);
  for (auto next = steady::now() + interval;;) {
    {
      std::unique_lock guard{watch_mutex_};
      // Woken early by stop; down messages wait in the mailbox until then.
      if (watch_wake_.wait_until(guard, next, [&] { return watch_stopping_; }))
        return;
    }
    next = steady::now() + interval;
    for (bool more = true; more;)
      self->receive(
          [&](caf::down_msg& down) {
            for (uint32_t n = 0; n < nodes; ++n)
              if (agents[n] == down.source)
                lost[n] = true;
          },
          caf::after(std::chrono::milliseconds(0)) >> [&] { more = false; });
    for (uint32_t n = 0; n < nodes; ++n) {
      if (!lost[n] || !listening(*parse_node_address(cfg_.nodes[n].address)))
        continue;
      auto err = rejoin_node(n);
      // Taken back, here or by another rejoin_node call: watch its new agent.
      if (!err || is(err, errc::already_exists)) {
        lost[n] = false;
        last_error[n].clear();
        watch(n);
        continue;
      }
      if (auto text = describe(err); text != last_error[n]) {
        spdlog::warn("node {} answers at {} but did not rejoin: {}", n, cfg_.nodes[n].address,
                     text);
        last_error[n] = std::move(text);
      }
    }
  }
}

} // namespace crescent
