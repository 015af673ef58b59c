// The owner's ends of peers' queue pairs. They post nothing (one-sided reads and writes need
// no work from the target), so they only exist: each is created for a connect request on a
// server connection and destroyed when that connection releases it (the initiator dropped or
// replaced its end), when the NIC reports it failed, or when the connection ends, which is
// how a peer that went away (or reconnects) stops holding queue pairs here. Each connection
// holds at most per_owner_max of them, and the process at most total_max.
#pragma once

#include "transport/rdma/rdma_device.hpp"
#include "transport/rdma/rdma_policy.hpp"

#include <caf/expected.hpp>

#include <mutex>
#include <unordered_map>

namespace crescent::transport::rdma {

class accepted_qps {
 public:
  /// Limits: per server connection, and in all. Past them connects are refused (no_space). A
  /// connection's share covers every device pair's pool of an initiator (16 of ours times 16
  /// ports of theirs, 2 queue pairs each, is 512) with room for replacements in flight.
  static constexpr size_t per_owner_max = 1024;
  static constexpr size_t total_max = 8192;

  accepted_qps() = default;
  accepted_qps(const accepted_qps&) = delete;
  accepted_qps& operator=(const accepted_qps&) = delete;
  ~accepted_qps() { clear(); }

  /// A queue pair on `d` connected to the initiator's (in RTS), owned by `owner`.
  caf::expected<qp_endpoint> accept(device& d, const qp_endpoint& initiator, const void* owner);

  /// Destroys `owner`'s queue pair `qp_num` on `d`; not_found if `owner` holds none such (a
  /// connection cannot release another's).
  caf::error release_one(const void* owner, const device& d, uint32_t qp_num);

  /// Destroys the queue pair `qp_num` of `d` whoever holds it (the NIC reported it failed);
  /// false if it is not one of these.
  bool drop_failed(const device& d, uint32_t qp_num);

  void release(const void* owner);
  void clear();

  size_t held(const void* owner) const;

 private:
  struct entry {
    const void* owner = nullptr;
    ibv_qp* qp = nullptr;
  };
  // Queue pair numbers are unique per device, not per process.
  using key = std::pair<const device*, uint32_t>;
  struct key_hash {
    size_t operator()(const key& k) const {
      return std::hash<const void*>{}(k.first) ^ (std::hash<uint32_t>{}(k.second) << 1);
    }
  };

  mutable std::mutex mutex_;
  qp_quota quota_{per_owner_max, total_max};
  std::unordered_map<key, entry, key_hash> qps_;
};

} // namespace crescent::transport::rdma
