// One reliable-connected queue pair of this engine, initiating RDMA READ and WRITE: one work
// request per slice, signaled, at most `depth` in flight (its send queue, and its reservation in
// the device's completion queue); more wait in order.
//
// Every posted request ends with exactly one completion, success or error, and only then does
// its slice end: once a completion is polled the NIC no longer touches the slice's buffer. To
// stop work early (a deadline, a lost peer) the queue pair is moved to ERR, which makes the NIC
// complete everything outstanding with a flush error. A broken queue pair is never used again;
// once drained its device retires it and a new one is connected in its place.
#pragma once

#include "transport/engine_internal.hpp"
#include "transport/rdma/rdma_device.hpp"
#include "transport/rdma/rdma_memory.hpp"

#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace crescent::transport::rdma {

/// A slice on the RDMA path, from start() until it ends. Its local buffer's region stays
/// pinned in the engine's table meanwhile, so the region (and its registration) outlives it.
struct work {
  slice_record* slice = nullptr;
  region_handle local_region;
  std::shared_ptr<const registration> local;
  uint32_t lkey = 0; // the rest is set once a device pair is chosen
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
};

/// Work that ended without a completion of its own, with the reason.
using endings = std::vector<std::pair<work, caf::error>>;

/// Unpins the work's region and ends its slice (which may start it again on another path).
void end_work(region_table& table, work& w, caf::error err);
void end_all(region_table& table, endings& done);

class queue_pair {
 public:
  /// A queue pair in INIT on `d` with `depth` send slots (reserved in the device's completion
  /// queue), adopted by the device. `node`: the peer's, for messages.
  static caf::expected<std::shared_ptr<queue_pair>> create(device& d, uint32_t depth,
                                                           uint32_t node);
  ~queue_pair();
  queue_pair(const queue_pair&) = delete;
  queue_pair& operator=(const queue_pair&) = delete;

  device& dev() const { return dev_; }
  uint32_t number() const { return number_; }
  const qp_endpoint& local_endpoint() const { return local_; }
  bool broken() const;

  /// Connects to the remote end (RTR, RTS) and posts the work that waited.
  caf::error connect(const qp_endpoint& remote, endings& out);

  /// Takes the work (posting it now if connected and a slot is free); false if broken, and the
  /// work is left with the caller.
  bool submit(work& w, endings& out);

  /// The work of a completion; `retire` is set when it was the last of a broken queue pair.
  struct finished {
    work w;
    bool retire = false;
  };
  finished complete(const ibv_wc& wc, endings& out);

  /// Moves it to ERR: what is in flight flushes, what waits ends with `reason`. True when
  /// nothing is in flight (the caller retires it).
  bool break_with(const caf::error& reason, endings& out);

  /// Ends the waiting work of `b` (timed out) and, if work of `b` is in flight, breaks it so
  /// that the NIC flushes it now. True when the caller must retire it.
  bool expire(const batch_state& b, endings& out);

  /// Destroys the verbs queue pair (the NIC no longer touches any of its buffers once that
  /// returns) and ends all its work with `reason`: for a device whose completions stopped.
  void abandon(const caf::error& reason, endings& out);

 private:
  enum class state { connecting, ready, broken };

  queue_pair(device& d, uint32_t depth, uint32_t node) : dev_(d), depth_(depth), node_(node) {}
  void post_locked(endings& out);
  size_t post_burst_locked(endings& out);
  void break_locked(const caf::error& reason, endings& out);
  bool take_retirement_locked();

  device& dev_;
  const uint32_t depth_;
  const uint32_t node_;
  ibv_qp* qp_ = nullptr;
  uint32_t number_ = 0;
  qp_endpoint local_{};
  mutable std::mutex mutex_;
  state state_ = state::connecting;
  bool retired_ = false;
  std::deque<work> waiting_;
  std::vector<work> slots_; // by wr_id; slice null: free
  std::vector<uint32_t> free_;
};

} // namespace crescent::transport::rdma
