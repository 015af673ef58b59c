// The data-plane server of one engine: it serves one-sided reads and writes of this process's
// registered regions to initiators elsewhere. One thread accepts; one thread per connection
// reads a request, checks the handle against the region table, and moves the payload between
// the socket and the region directly. It also answers the RDMA path's describe, connect and
// release requests (rdma/rdma_wire.hpp); queue pairs a connection asked for live until it
// releases them or ends.
#pragma once

#include "transport/rdma/rdma_responder.hpp"
#include "transport/region_table.hpp"

#include <caf/expected.hpp>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace crescent::transport::tcp {

class server {
 public:
  /// Connections served at once, at most; more are closed at accept.
  static constexpr size_t connections_max = 1024;

  /// `silence_max`: a peer silent this long in the middle of a request, or taking no byte of a
  /// response for this long in one send, is dropped (it holds a region pinned meanwhile); idle
  /// connections also wake this often. `rdma`: null where the engine has no RDMA path; else it
  /// must outlive stop().
  static caf::expected<std::unique_ptr<server>> start(region_table& table, const std::string& host,
                                                      uint16_t port,
                                                      std::chrono::milliseconds silence_max,
                                                      rdma::responder* rdma = nullptr);
  ~server();

  uint16_t port() const { return port_; }
  void stop();

 private:
  struct connection {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  server(region_table& table, std::chrono::milliseconds silence_max, rdma::responder* rdma)
      : table_(table), silence_max_(silence_max), rdma_(rdma) {}
  void accept_loop();
  void serve(connection& c);
  void reap();

  region_table& table_;
  std::chrono::milliseconds silence_max_;
  rdma::responder* rdma_;
  int listen_fd_ = -1;
  int wake_fd_ = -1; // an eventfd that ends the accept loop
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::list<connection> connections_;
};

} // namespace crescent::transport::tcp
