// The RDMA path to one peer process:
// - which of its regions this engine knows (address, length, remote key per device), learned
//   from the owner on first use and forgotten on a remote access error;
// - a pool of queue pairs for each pair of devices that can reach each other, created when
//   first needed and replaced when broken (the owner is told to release its end of the one
//   replaced); a pool whose new queue pairs fail before they ever work is left alone for a
//   while (path_health), and its slices move on to the next path as unavailable;
// - a worker thread that does what may block, off the submitting and completion threads:
//   describe, connect and release requests over the control channel, and watching that
//   channel, whose loss means the peer's ends of our queue pairs are gone.
// Slices wait (in order) for their region's description or their queue pair's connection;
// a deadline ends the waiting ones at once. Work in flight ends with its completions: queue
// pairs are shared by batches and are not reset for one batch's deadline (queue_pair::sweep
// bounds that wait).
#pragma once

#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"
#include "transport/rdma/rdma_control.hpp"
#include "transport/rdma/rdma_queue_pair.hpp"

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace crescent::transport::rdma {

/// What a peer uses of its backend; both outlive it.
struct path_context {
  transfer_engine::impl& engine;
  const std::vector<std::unique_ptr<device>>& devices;
};

class peer {
 public:
  /// Regions remembered per peer, at most; past it the cache starts over.
  static constexpr size_t regions_cached_max = 1u << 16;

  /// unavailable if the peer has no RDMA port, no TCP server, or no port any of our devices
  /// reaches.
  static caf::expected<std::shared_ptr<peer>> create(const peer_info& info, path_context ctx);
  ~peer();
  peer(const peer&) = delete;
  peer& operator=(const peer&) = delete;

  const peer_info& info() const { return info_; }

  /// Moves a slice on: describes its region if needed, then posts it on a queue pair.
  void submit(work w);

  /// Ends the batch's waiting slices (not its slices in flight, see above).
  void expire(const batch_state& b);

  /// Forgets a region after a remote access error: the next use asks its owner again.
  void invalidate(uint64_t region_id);

  /// Ends what waits, breaks every queue pair, stops the worker. Idempotent.
  void stop();

 private:
  // A region as described, with its keys by our index of the owner's ports.
  struct described {
    remote_region region;
    std::vector<std::pair<size_t, uint32_t>> keys; // (remote port, rkey), owner's order
  };
  struct pool {
    size_t device = 0; // ours
    size_t port = 0;   // index into info_.rdma_ports
    std::vector<std::shared_ptr<queue_pair>> qps;
    uint32_t next = 0;
    std::shared_ptr<path_health> health = std::make_shared<path_health>();
  };
  enum class job_kind { describe, connect, release };
  struct job {
    job_kind kind = job_kind::describe;
    region_handle handle;          // describe: the region; connect: the proof the owner checks
    size_t pool = 0;               // connect
    std::weak_ptr<queue_pair> qp;  // connect
    queue_pair::remote_end remote; // release
  };
  using region_key_t = std::pair<uint64_t, uint64_t>; // (region id, access key)

  peer(const peer_info& info, path_context ctx);
  void run();
  void wait_idle();
  void run_describe(const job& j);
  void run_connect(const job& j);
  void run_release(const job& j);
  void take_described(const job& j, const caf::expected<remote_region>& reply,
                      std::shared_ptr<const described>& d, std::vector<work>& go, endings& out);
  std::shared_ptr<const described> translate(const remote_region& r) const;
  void route(work w, const described& d);
  caf::expected<std::shared_ptr<queue_pair>> pick_locked(work& w, const described& d,
                                                         bool& wake_worker);
  caf::expected<std::shared_ptr<queue_pair>>
  slot_locked(size_t pool_index, const region_handle& proof, bool& wake_worker);
  std::vector<std::shared_ptr<queue_pair>> all_qps_locked() const;
  void channel_lost();
  void retire(const std::shared_ptr<queue_pair>& qp);
  void wake();
  caf::error error_here(errc code, const std::string& what) const;

  const peer_info info_;
  const uint32_t node_; // the peer's first node, for messages
  path_context ctx_;
  control_channel control_;
  std::vector<pool> pools_;   // fixed once created; their queue pairs change
  std::vector<long> pool_at_; // [device * ports + port]: pool index, or -1
  int wake_fd_ = -1;
  std::thread worker_;

  mutable std::mutex mutex_; // guards everything below, and the pools' queue pairs and cooldowns
  bool stopping_ = false;
  std::unordered_map<uint64_t, std::shared_ptr<const described>> cache_; // by region id
  std::map<region_key_t, std::vector<work>> waiting_;                    // for a description
  std::deque<job> jobs_;
};

} // namespace crescent::transport::rdma
