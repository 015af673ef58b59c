// The owner's ends of peers' queue pairs. They post nothing (one-sided reads and writes need
// no work from the target), so they only exist: each is created for a connect request on a
// server connection and destroyed when that connection ends, which is how a peer that went
// away (or reconnects) stops holding queue pairs here.
#pragma once

#include "transport/rdma/rdma_device.hpp"

#include <caf/expected.hpp>

#include <mutex>
#include <unordered_map>
#include <vector>

namespace crescent::transport::rdma {

class accepted_qps {
 public:
  /// Limits: per server connection, and in all. Past them connects are refused (no_space).
  static constexpr size_t per_owner_max = 1024;
  static constexpr size_t total_max = 8192;

  accepted_qps() = default;
  accepted_qps(const accepted_qps&) = delete;
  accepted_qps& operator=(const accepted_qps&) = delete;
  ~accepted_qps() { clear(); }

  /// A queue pair on `d` connected to the initiator's (in RTS), owned by `owner`.
  caf::expected<qp_endpoint> accept(device& d, const qp_endpoint& initiator, const void* owner);

  void release(const void* owner);
  void clear();

 private:
  bool reserve(const void* owner);
  void unreserve(const void* owner);

  std::mutex mutex_;
  std::unordered_map<const void*, std::vector<ibv_qp*>> by_owner_;
  std::unordered_map<const void*, size_t> reserved_;
  size_t total_ = 0;
};

} // namespace crescent::transport::rdma
