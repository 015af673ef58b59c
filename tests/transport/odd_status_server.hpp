// A data-plane server on loopback that answers every request, on every connection it accepts,
// with one fixed status and no message: what a peer that does not speak the protocol (or lies)
// looks like to an initiator.
#pragma once

#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_protocol.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace crescent::transport {

class odd_status_server {
 public:
  explicit odd_status_server(uint8_t status) : status_(status) {
    auto l = tcp::listen_on("127.0.0.1", 0);
    EXPECT_TRUE(l) << describe(l.error());
    listen_fd_ = l->first;
    port_ = l->second;
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~odd_status_server() {
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

  uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  void accept_loop() {
    for (;;) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0)
        return;
      ++connections_;
      std::lock_guard guard{mutex_};
      fds_.push_back(fd);
      servers_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    for (;;) {
      tcp::request_header req;
      if (tcp::read_full(fd, &req, sizeof(req)))
        return;
      const bool carries = req.kind == tcp::kind_write || req.kind == tcp::kind_connect ||
                           req.kind == tcp::kind_release;
      std::vector<std::byte> payload(carries && req.length <= (1u << 24) ? req.length : 0);
      if (tcp::read_full(fd, payload.data(), payload.size()))
        return;
      tcp::response_header res;
      res.request_id = req.request_id;
      res.status = status_;
      iovec iov{&res, sizeof(res)};
      if (tcp::write_all(fd, &iov, 1))
        return;
    }
  }

  const uint8_t status_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::vector<int> fds_;
  std::vector<std::thread> servers_;
  std::thread acceptor_;
};

} // namespace crescent::transport
