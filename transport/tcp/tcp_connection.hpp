// One client connection of the TCP path to a peer. A sender thread writes requests (a write's
// payload straight from the initiator's buffer) and a receiver thread reads responses (a read's
// payload straight into the initiator's buffer), so many slices are in flight at once. When the
// connection breaks, every slice queued on or in flight over it ends with an io_error, which the
// engine retries on another connection while attempts and the deadline allow.
#pragma once

#include "transport/engine_internal.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace crescent::transport::tcp {

class connection {
 public:
  /// Slices in flight at once on one connection, at most.
  static constexpr size_t window_slices = 64;
  /// Once the window is full, the sender waits until this few are left in flight: it then
  /// sends a burst, instead of one slice per response (a wake-up and a system call each).
  static constexpr size_t window_resume_slices = window_slices / 2;
  /// Slices written with one system call, at most.
  static constexpr size_t burst_slices_max = 32;
  /// Payload bytes written with one system call, at most (but always the first slice). Where the
  /// kernel does not preempt (PREEMPT_NONE, as in many VMs), a thread woken on the sender's CPU,
  /// such as this connection's receiver, waits for the whole call: 32 slices of 1 MiB took
  /// milliseconds. Smaller calls cost more than they give (docs/benchmarks-archive.md).
  static constexpr uint64_t burst_payload_bytes_max = 4u << 20;

  /// What tests set and read, and nothing else does.
  struct test_hooks {
    /// What flush() writes from its caller's thread, at most. Lowered, it takes the path where
    /// the sender finishes a flush's requests, which otherwise needs the socket to fill up just
    /// as the sender went idle.
    static inline std::atomic<uint64_t> inline_send_bytes_max{UINT64_MAX};
    static inline std::atomic<uint64_t> inline_sends{0};     // flushes that wrote requests
    static inline std::atomic<uint64_t> handed_to_sender{0}; // of which the sender finished
    static inline std::atomic<uint64_t> acks_requested{0};   // writes sent with flag_ack_now
  };

  connection(std::string host, uint16_t port, uint32_t node, std::chrono::milliseconds timeout);
  ~connection();

  /// Queues a slice; false if the connection is broken (the slice was not taken). While its
  /// batch is launching the sender is not woken: flush() follows.
  bool enqueue(slice_record& s);

  /// Sends what enqueue() held back. Requests without payload (reads) go out from this thread
  /// when nothing else is sending, without blocking: waking the sender thread costs the batch a
  /// context switch on its critical path (60 us on average here). Anything else, and whatever
  /// the socket does not take at once, is left to the sender thread.
  void flush();

  /// Breaks the connection if a slice of `b` is queued, in flight or being received on it.
  void expire(const batch_state& b);

  bool broken() const;
  void stop();

 private:
  // A slice about to be written, and whether it is the last of its batch queued here: the
  // server then sends the acknowledgements it holds right behind it (flag_ack_now).
  struct burst_slice {
    slice_record* slice = nullptr;
    bool ends_batch = false;
  };
  using burst_t = std::vector<burst_slice>;

  void send_loop();
  void receive_loop();
  void take_burst(burst_t& burst, bool reads_only);
  using late_slices = std::vector<std::pair<slice_record*, caf::error>>;
  late_slices send_burst(const burst_t& burst, bool from_caller);
  void fail_all(const caf::error& reason, slice_record* also = nullptr);

  std::string host_;
  uint16_t port_;
  uint32_t node_;
  std::chrono::milliseconds connect_timeout_;
  int fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable send_done_; // stop() waits on it for a flush() that is writing
  std::deque<slice_record*> queue_;
  std::unordered_map<uint64_t, slice_record*> in_flight_;
  // The slice whose response the receiver is reading: no longer in flight, not yet complete. A
  // peer that stalls in the middle of its payload holds it here until expire cuts the stream.
  slice_record* receiving_ = nullptr;
  uint64_t next_request_ = 1;
  bool window_full_ = false;      // the sender waits for window_resume_slices
  bool sending_ = false;          // a thread writes to the socket: the sender, or flush()'s caller
  std::vector<std::byte> unsent_; // the rest of requests flush() wrote, for the sender to finish
  bool connected_ = false;
  bool broken_ = false;
  bool stopping_ = false;
  std::atomic<bool> abandon_connect_{false}; // stop() does not wait out a connect

  std::thread sender_;
  std::thread receiver_;
};

} // namespace crescent::transport::tcp
