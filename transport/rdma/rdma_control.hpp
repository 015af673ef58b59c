// The initiator's end of the RDMA control requests to one peer (describe, connect, release): a
// TCP connection to the peer's data-plane server, opened on first use, with TCP keepalive so
// that a peer whose host vanished is noticed while idle. The peer's ends of queue pairs
// connected through it live until released or until it closes, so losing it means losing
// them; generation() changes each time an open connection is lost, for the caller to notice.
//
// Used by one thread at a time (the peer's worker); interrupt() may come from any thread.
#pragma once

#include "transport/rdma/rdma_wire.hpp"
#include "transport/region_handle.hpp"

#include <caf/expected.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace crescent::transport::rdma {

class control_channel {
 public:
  control_channel(std::string host, uint16_t port, uint32_t node,
                  std::chrono::milliseconds timeout);
  ~control_channel();
  control_channel(const control_channel&) = delete;
  control_channel& operator=(const control_channel&) = delete;

  /// Where the region of `h` lives, checked by its owner as a read of all of `h` would be.
  /// Refusals come back as the owner's error (not_found, access_denied, out_of_range); a lost
  /// connection or a peer that cannot be reached as io_error or unavailable.
  caf::expected<remote_region> describe(const region_handle& h);

  /// The owner's end of a queue pair for ours. `proof`: a handle of one of the owner's regions
  /// (the owner creates queue pairs only for peers it gave a handle to); refusals of it come
  /// back as for describe.
  caf::expected<qp_endpoint> connect(const connect_request& req, const region_handle& proof);

  /// Tells the owner to destroy its queue pair `qp_num` on its `device` (connected through this
  /// connection in generation `generation`). Nothing to do, and none, if the connection was
  /// lost since: the owner destroyed it then.
  caf::error release(const std::string& device, uint32_t qp_num, uint64_t generation);

  /// The socket while connected, else -1: the worker watches it for the peer hanging up.
  int fd() const;

  /// Closes the connection (a lost one, or on the owner's hang-up).
  void close();

  /// Unblocks a request in progress from another thread, its connect included (within 50 ms),
  /// for good: the connection is lost, and later requests fail with unavailable.
  void interrupt();

  uint64_t generation() const;

 private:
  caf::expected<std::vector<std::byte>> exchange(uint8_t kind, const region_handle* h,
                                                 uint64_t length, const void* payload,
                                                 uint64_t payload_bytes, uint64_t reply_max);
  caf::error lost(const std::string& why);
  caf::error interrupted() const;

  const std::string host_;
  const uint16_t port_;
  const uint32_t node_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_; // guards fd_ and generation_ against interrupt()
  int fd_ = -1;
  std::atomic<bool> abandoned_{false}; // interrupt() ran: no more connects or requests
  uint64_t generation_ = 0;
  uint64_t next_request_ = 1;
};

/// The least time a control request's connect and reply are given (transfer_options'
/// connect_timeout where larger).
inline constexpr std::chrono::milliseconds control_reply_min{1000};

/// Turns on TCP keepalive for a connection that holds queue pairs (either end): probes after
/// keepalive_idle of silence, keepalive_probes of them keepalive_interval apart, so a peer
/// whose host vanished without closing is noticed in about 40 s and its queue pairs go.
inline constexpr int keepalive_idle_s = 10;
inline constexpr int keepalive_interval_s = 5;
inline constexpr int keepalive_probes = 6;
void enable_keepalive(int fd);

} // namespace crescent::transport::rdma
