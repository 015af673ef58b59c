// A TCP server on loopback for tests that play a peer with raw sockets: it accepts every
// connection and runs `serve(fd, n)` for the n-th one on a thread of its own. A connection whose
// handler returned is closed and its thread joined at the next accept; the server's end shuts
// the others down and joins them.
#pragma once

#include "messages/errors.hpp"
#include "transport/tcp/socket_io.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace crescent::transport {

class loopback_server {
 public:
  using handler = std::function<void(int fd, uint64_t n)>;

  explicit loopback_server(handler serve) : serve_(std::move(serve)) {
    auto l = tcp::listen_on("127.0.0.1", 0);
    if (!l) {
      ADD_FAILURE() << "cannot listen: " << describe(l.error());
      return;
    }
    listen_fd_ = l->first;
    port_ = l->second;
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~loopback_server() {
    if (listen_fd_ < 0)
      return;
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    for (auto& c : connections_)
      shutdown(c.fd, SHUT_RDWR);
    for (auto& c : connections_) {
      c.thread.join();
      close(c.fd);
    }
    close(listen_fd_);
  }

  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;

  uint16_t port() const { return port_; }
  int connections() const { return accepted_.load(); }

 private:
  struct connection {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  // Only this thread touches connections_ until the destructor has joined it.
  void accept_loop() {
    for (uint64_t n = 0;; ++n) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0)
        return;
      ++accepted_;
      connections_.remove_if([](connection& c) {
        if (!c.finished.load())
          return false;
        c.thread.join();
        close(c.fd);
        return true;
      });
      auto& c = connections_.emplace_back();
      c.fd = fd;
      c.thread = std::thread([this, &c, n] {
        serve_(c.fd, n);
        c.finished = true;
      });
    }
  }

  handler serve_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::list<connection> connections_;
  std::thread acceptor_;
};

} // namespace crescent::transport
