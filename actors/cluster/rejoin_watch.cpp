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

#include <algorithm>
#include <chrono>

namespace crescent {

namespace {

using steady = std::chrono::steady_clock;

// How long the check that a node answers at its address waits, connect and first bytes
// together. CAF's connect blocks without a limit: behind a partition it would hold the watch for
// minutes.
constexpr int answer_check_ms = 200;

// Whether a process answers at `a` within answer_check_ms: a TCP connection opens and its first
// bytes arrive (the connection is closed at once). CAF's accepting side speaks first (BASP's
// server handshake), so a live middleman answers, while a stopped process does not: its kernel
// still completes the connect from the listen backlog, and a rejoin started then would wait
// inside CAF's connect until the process ran again, when it may be about to start afresh.
bool answers(const node_address& a) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &found) != 0)
    return false;
  const auto until = steady::now() + std::chrono::milliseconds(answer_check_ms);
  auto left_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  };
  bool answered = false;
  for (auto* ai = found; ai != nullptr && !answered; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0)
      continue;
    bool open = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!open && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      open = poll(&p, 1, left_ms()) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
             err == 0;
    }
    if (open) {
      pollfd p{fd, POLLIN, 0};
      char byte = 0;
      answered = poll(&p, 1, left_ms()) == 1 && recv(fd, &byte, 1, MSG_PEEK) == 1;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return answered;
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
      if (!lost[n] || !answers(*parse_node_address(cfg_.nodes[n].address)))
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
