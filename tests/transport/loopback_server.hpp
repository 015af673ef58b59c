// A TCP server on loopback for tests that play a peer with raw sockets: it accepts every
// connection and runs `serve(fd, n)` for the n-th one on a thread of its own. Its end shuts every
// connection down and joins those threads.
#pragma once

#include "messages/errors.hpp"
#include "transport/tcp/socket_io.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace crescent::transport {

class loopback_server {
 public:
  using handler = std::function<void(int fd, uint64_t n)>;

  explicit loopback_server(handler serve) : serve_(std::move(serve)) {
    auto l = tcp::listen_on("127.0.0.1", 0);
    EXPECT_TRUE(l) << describe(l.error());
    listen_fd_ = l->first;
    port_ = l->second;
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~loopback_server() {
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard guard{mutex_};
      for (int fd : fds_)
        shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : servers_)
      t.join();
    for (int fd : fds_)
      close(fd);
    close(listen_fd_);
  }

  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;

  uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  void accept_loop() {
    for (uint64_t n = 0;; ++n) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0)
        return;
      ++connections_;
      std::lock_guard guard{mutex_};
      fds_.push_back(fd);
      servers_.emplace_back([this, fd, n] { serve_(fd, n); });
    }
  }

  handler serve_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::vector<int> fds_;
  std::vector<std::thread> servers_;
  std::thread acceptor_;
};

} // namespace crescent::transport
