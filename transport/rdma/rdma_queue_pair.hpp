// One reliable-connected queue pair of this engine, initiating RDMA READ and WRITE: one work
// request per slice, signaled, at most `depth` in flight (its send queue, and its reservation in
// the device's completion queue); more wait in order.
//
// Every posted request ends with exactly one completion, success or error, and only then does
// its slice end: once a completion is polled the NIC no longer touches the slice's buffer. To
// stop work early (a lost peer, a queue pair error) the queue pair is moved to ERR, which makes
// the NIC complete everything outstanding with a flush error. A broken queue pair is never
// used again; once drained its device retires it and a new one is connected in its place.
//
// A deadline does not break a queue pair: other batches' work shares it. The expired batch's
// waiting work ends at once; its work in flight ends with its own completions, normally within
// microseconds. Nothing waits on a NIC unbounded (sweep, rdma_policy.hpp): a queue pair whose
// expired work is still in flight well past its deadline is reset as stuck, and one whose
// flushes do not come is destroyed, which also stops the NIC touching its buffers.
//
// A queue pair whose first work fails on the wire puts its device pair (path_health) into a
// cooldown, and its work moves on to the next path as unavailable.
#pragma once

#include "transport/engine_internal.hpp"
#include "transport/rdma/rdma_device.hpp"
#include "transport/rdma/rdma_memory.hpp"
#include "transport/rdma/rdma_policy.hpp"
#include "transport/rdma/rdma_qp_setup.hpp"

#include <array>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace crescent::transport::rdma {

/// An injected corruption of a WRITE (slice_fault::corrupt): the bytes that go out in place of
/// the source's window (corrupted_window), gathered from memory of their own so that the
/// source stays as it is. Registered with the device of the queue pair that posts it, and
/// deregistered as it goes, which is after the work's completion.
struct changed_window {
  std::array<std::byte, 8> bytes{};
  ibv_mr* mr = nullptr;

  changed_window() = default;
  changed_window(const changed_window&) = delete;
  changed_window& operator=(const changed_window&) = delete;
  ~changed_window() {
    if (mr != nullptr)
      ibv_dereg_mr(mr);
  }
};

/// A slice on the RDMA path, from start() until it ends. Its local buffer's region stays
/// pinned in the engine's table meanwhile, so the region (and its registration) outlives it.
struct work {
  slice_record* slice = nullptr;
  region_handle local_region;
  std::shared_ptr<const registration> local;
  uint32_t lkey = 0; // the rest is set once a device pair is chosen
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  std::unique_ptr<changed_window> changed; // a corrupted WRITE only
};

/// Work that ended without a completion of its own, with the reason.
using endings = std::vector<std::pair<work, caf::error>>;

/// Lets go of the work's memory registration, then unpins its region, and ends its slice
/// (which may start it again on another path). In that order: once the region is unpinned
/// unregister_region may return, and by then no work may hold its registration (the last
/// holder deregisters it, which must happen before unregister_region returns).
void end_work(region_table& table, work& w, caf::error err);
void end_all(region_table& table, endings& done);

/// Whether a device pair to a peer works: shared by its pool and the queue pairs made for it,
/// which report their first success or their failure to ever work.
class path_health {
 public:
  void failed(clock_type::time_point now) {
    std::lock_guard guard{mutex_};
    state_.failed(now);
  }
  void succeeded() {
    std::lock_guard guard{mutex_};
    state_.succeeded();
  }
  bool down(clock_type::time_point now) const {
    std::lock_guard guard{mutex_};
    return state_.down(now);
  }

 private:
  mutable std::mutex mutex_;
  backoff state_;
};

/// What a work completion status means to the path (rdma_policy.hpp).
wc_kind kind_of(ibv_wc_status status);

class queue_pair {
 public:
  /// A queue pair in INIT on `d` with `depth` send slots (reserved in the device's completion
  /// queue), adopted by the device. `node`: the peer's, for messages; `health`: its device
  /// pair's, or null.
  static caf::expected<std::shared_ptr<queue_pair>>
  create(device& d, uint32_t depth, uint32_t node, std::shared_ptr<path_health> health = nullptr);
  ~queue_pair();
  queue_pair(const queue_pair&) = delete;
  queue_pair& operator=(const queue_pair&) = delete;

  device& dev() const { return dev_; }
  uint32_t number() const { return number_; }
  const qp_endpoint& local_endpoint() const { return local_; }
  bool broken() const;

  /// Connects to the remote end (RTR, RTS) and posts the work that waited. `generation`: of the
  /// control connection the remote end was made through, for release.
  caf::error connect(const qp_endpoint& remote, uint64_t generation, endings& out);

  /// The owner's end, once connected: what a release request names.
  struct remote_end {
    std::string device;
    uint32_t qp_num = 0;
    uint64_t generation = 0;
  };
  std::optional<remote_end> remote() const;

  /// Takes the work (posting it now if connected and a slot is free); false if broken, and the
  /// work is left with the caller.
  bool submit(work& w, endings& out);

  /// The work of a completion and how it ends; `retire` is set when it was the last of a broken
  /// queue pair, `invalidate` when the owner refused the remote key (a stale description).
  /// A completion that matches no request in flight here (a stale one of a destroyed queue
  /// pair whose number was reused) comes back with no work.
  struct finished {
    work w;
    caf::error err;
    bool retire = false;
    bool invalidate = false;
  };
  finished complete(const ibv_wc& wc, endings& out);

  /// Moves it to ERR: what is in flight flushes, what waits ends with `reason`. True when
  /// nothing is in flight (the caller retires it).
  bool break_with(const caf::error& reason, endings& out);

  /// The NIC reported the queue pair failed (an asynchronous event): broken as by break_with,
  /// and, if it never completed work, its device pair cools down and its work moves on to the
  /// next path (as for a first completion that fails). True when the caller retires it.
  bool fail(const caf::error& why, endings& out);

  /// Ends the waiting work of `b` (timed out). Its work in flight ends with its completions
  /// (see sweep): the queue pair, which other batches share, is not broken for it.
  void expire(const batch_state& b, endings& out);

  /// Bounds the wait for the NIC (rdma_policy.hpp, decide_sweep): resets the queue pair if
  /// expired work stays in flight past the grace, destroys it if its flushes do not come.
  /// True when the caller must retire it (also for one broken and drained but not retired).
  bool sweep(clock_type::time_point now, const sweep_limits& limits, endings& out);

  /// Destroys the verbs queue pair (the NIC no longer touches any of its buffers once that
  /// returns) and ends all its work with `reason`: for a device whose completions stopped.
  void abandon(const caf::error& reason, endings& out);

 private:
  enum class state { connecting, ready, broken };

  queue_pair(device& d, uint32_t depth, uint32_t node, std::shared_ptr<path_health> health);
  void post_locked(endings& out);
  size_t post_burst_locked(endings& out);
  void break_locked(const caf::error& reason, endings& out);
  bool take_retirement_locked();
  void destroy_locked(const caf::error& reason, endings& out);
  uint64_t wr_id(uint32_t slot) const { return (uint64_t{instance_} << 32) | slot; }
  std::string context_locked(const work& w, const ibv_wc& wc) const;
  int gather_locked(work& w, std::array<ibv_sge, send_sge_max>& sge);

  device& dev_;
  const uint32_t depth_;
  const uint32_t node_;
  const std::shared_ptr<path_health> health_;
  // Tags every work request id: a completion of another queue pair that had this number (a
  // destroyed one whose late completions the provider left in the queue) is told apart.
  const uint32_t instance_;
  ibv_qp* qp_ = nullptr;
  uint32_t number_ = 0;
  qp_endpoint local_{};
  mutable std::mutex mutex_;
  state state_ = state::connecting;
  bool retired_ = false;
  bool ever_succeeded_ = false;
  errc broken_code_ = errc::io_error; // what flushed work ends as
  std::optional<clock_type::time_point> broken_at_;
  std::optional<remote_end> remote_;
  std::deque<work> waiting_;
  std::vector<work> slots_; // by slot; slice null: free
  std::vector<uint32_t> free_;
};

} // namespace crescent::transport::rdma
