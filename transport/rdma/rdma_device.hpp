// One opened RDMA device: its protection domain, the port this engine uses (with the GID or LID
// peers reach it at), one completion queue for every queue pair on it, and the thread that
// polls that queue. The same thread reads the device's asynchronous events (a queue pair or
// the whole device failing, the port going down) and, every tick_interval, lets the owner
// sweep its queue pairs for work a NIC never completed. Built only with rdma-core.
#pragma once

#include "transport/rdma/rdma_devices.hpp"
#include "transport/rdma/rdma_wire.hpp"
#include "transport/transfer_types.hpp"

#include <caf/expected.hpp>
#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

namespace crescent::transport::rdma {

class queue_pair;
class device;

/// The port of a device this engine uses, and how peers address it.
struct port_choice {
  uint8_t num = 0;
  uint8_t link_layer = 0; // link_infiniband or link_ethernet
  uint16_t lid = 0;       // InfiniBand; as the port was opened (device::address() is current)
  ibv_mtu mtu = IBV_MTU_1024;
  int gid_index = 0; // as the port was opened (device::address() is current)
  ibv_gid gid{};     // as the port was opened (device::address() is current)
  uint32_t max_msg_bytes = 0;
};

/// Where a port is reached now: the subnet manager may assign another LID, and a RoCE GID
/// follows the interface's IP address.
struct port_address {
  uint16_t lid = 0;  // InfiniBand
  int gid_index = 0; // the source GID of RoCE packets; InfiniBand: 0, its port GID
  ibv_gid gid{};
};

/// How this engine's RDMA packets leave a port, and how long a queue pair keeps trying to
/// deliver them (rdma_qp_setup.hpp).
struct link_options {
  int32_t gid_index = -1; // RoCE: the source GID's index; -1: the best RoCE GID
  uint8_t traffic_class = 0;
  uint8_t service_level = 0; // clamped to 7 on RoCE (effective_service_level)
  uint8_t qp_timeout = 18;   // 4.096 us * 2^n per try
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 7;
};

/// Which devices open_devices opens, and how.
struct device_options {
  std::vector<std::string> names; // empty: all
  link_options link;
  /// Calls ibv_fork_init before any other verbs call (see open_devices).
  bool fork_safe = false;
};

/// What a device's poller thread reports, to the one owner of its queue pairs.
class device_events {
 public:
  virtual ~device_events() = default;
  /// A batch of completions.
  virtual void on_completions(device& d, std::span<const ibv_wc> wcs) = 0;
  /// The completion queue or the whole device failed: no further completions come, and every
  /// queue pair on it must be destroyed before its work may end. Called once.
  virtual void on_device_failed(device& d, const caf::error& why) = 0;
  /// A queue pair on the device failed asynchronously (the NIC moved it to ERR). The event has
  /// been acknowledged, so the queue pair may be destroyed.
  virtual void on_qp_failed(device& d, uint32_t qp_num, const caf::error& why) = 0;
  /// Every tick_interval or so, whether or not completions come.
  virtual void on_tick(device& d, clock_type::time_point now) = 0;
};

/// What an asynchronous event means here.
enum class async_action { ignore, qp_failed, device_failed, port_down, port_up, address_changed };
async_action classify_async_event(ibv_event_type type);

/// The first active port of a device: on InfiniBand with its LID, on Ethernet with the GID at
/// `gid_index` or, for -1, the best RoCE GID of its table. unavailable with the reason if none.
caf::expected<port_choice> choose_port(ibv_context* ctx, const std::string& device_name,
                                       uint8_t port_count, int32_t gid_index);

/// Port `num` described again (after an address change or a port event): unavailable while it
/// is not active, has no LID (InfiniBand) or no RoCE GID fit for `gid_index` (-1: the best).
caf::expected<port_choice> describe_port_again(ibv_context* ctx, const std::string& device_name,
                                               uint8_t num, int32_t gid_index);

class device {
 public:
  static constexpr int cq_entries_max = 1 << 16;
  static constexpr int poll_batch = 32;
  static constexpr std::chrono::milliseconds tick_interval{100};
  /// Asynchronous events read per tick, at most (each is acknowledged at once).
  static constexpr int async_events_per_tick = 64;

  static caf::expected<std::unique_ptr<device>> open(ibv_device* dev, const rdma_device& info,
                                                     const link_options& link);
  ~device();
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  const std::string& name() const { return info_.name; }
  int numa_node() const { return info_.numa_node; }
  const port_choice& port() const { return port_; }
  const link_options& link() const { return link_; }
  ibv_pd* pd() const { return pd_; }
  ibv_cq* cq() const { return cq_; }
  uint32_t max_qp_wr() const { return static_cast<uint32_t>(attr_.max_qp_wr); }
  bool failed() const { return failed_.load(); }
  /// Usable for new work: not failed and its port up (as the last port event said).
  bool usable() const { return !failed_.load() && port_up_.load(); }

  /// RDMA READs a queue pair here may have outstanding as requester, and may serve at once as
  /// responder (both 1..16: more buys nothing for large reads).
  uint8_t rd_atomic_init() const;
  uint8_t rd_atomic_dest() const;

  /// The port's LID and GID now (refreshed on LID and GID change events).
  port_address address() const;

  /// What a peer needs to connect to queue pair `qp_num` here.
  qp_endpoint endpoint(uint32_t qp_num, uint32_t psn) const;
  rdma_port_info advertised() const;

  /// Room in the completion queue: each initiating queue pair reserves one entry per work
  /// request it may have in flight, so that the queue can never overflow.
  bool reserve(uint32_t entries);
  void release(uint32_t entries);

  // Initiating queue pairs, found by number when their completions arrive. One is adopted when
  // created and retired once broken and drained (retire hands it back, so that the caller
  // destroys it outside the lock). A number is reused once its queue pair is destroyed, so
  // retire removes `qp` only, never a newer queue pair adopted under its number.
  /// False, adopting nothing, once the device has failed.
  [[nodiscard]] bool adopt(const std::shared_ptr<queue_pair>& qp);
  std::shared_ptr<queue_pair> find(uint32_t qp_num) const;
  std::shared_ptr<queue_pair> retire(const std::shared_ptr<queue_pair>& qp);
  std::vector<std::shared_ptr<queue_pair>> queue_pairs() const;

  /// Starts the poller thread; `events` must outlive stop().
  void start(device_events& events);
  void stop(); // joins the poller; completions not polled by then stay in the queue

 private:
  device() = default;
  void poll_loop();
  bool wait_for_event(int timeout_ms);
  void read_async_events();
  void refresh_address();
  void fail(const caf::error& why);

  rdma_device info_;
  link_options link_;
  ibv_context* ctx_ = nullptr;
  ibv_device_attr attr_{};
  port_choice port_;
  mutable std::mutex address_mutex_;
  port_address address_; // guarded by address_mutex_
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int wake_fd_ = -1;
  std::atomic<int64_t> cq_room_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> port_up_{true};
  std::atomic<bool> stopping_{false};
  device_events* events_ = nullptr;
  std::thread poller_;
  mutable std::mutex qps_mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<queue_pair>> qps_;
};

/// Opens the devices rdma_devices() finds, at most rdma_devices_max: those named in
/// `options.names` (in that order) or, if it is empty, all. Devices that cannot be used (no
/// active port, say) are skipped; unavailable with every reason if none can.
caf::expected<std::vector<std::unique_ptr<device>>> open_devices(const device_options& options);

} // namespace crescent::transport::rdma
