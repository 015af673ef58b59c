// transfer_options: every limit, checked before an engine starts anything.
#include "messages/errors.hpp"
#include "transport/transfer_engine.hpp"

#include <set>

namespace crescent::transport {

namespace {

// RDMA options are checked whether or not a device exists, so that a configuration fails the
// same way on every machine.
caf::error check_rdma_options(const transfer_options& o) {
  if (o.rdma_qps_per_peer == 0 || o.rdma_qps_per_peer > 64)
    return make_error(errc::invalid_argument, "RDMA queue pairs per peer must be in [1, 64]");
  if (o.rdma_queue_depth == 0 || o.rdma_queue_depth > 4096)
    return make_error(errc::invalid_argument, "RDMA queue depth must be in [1, 4096]");
  if (o.rdma_gid_index < -1 || o.rdma_gid_index > 255)
    return make_error(errc::invalid_argument, "RDMA GID index must be -1 (automatic) or 0..255");
  if (o.rdma_service_level > 15)
    return make_error(errc::invalid_argument, "RDMA service level must be in [0, 15]");
  // 0 would mean "wait forever": a peer that vanished would never fail its work.
  if (o.rdma_qp_timeout == 0 || o.rdma_qp_timeout > 31)
    return make_error(errc::invalid_argument, "RDMA queue pair timeout must be in [1, 31]");
  if (o.rdma_retry_count > 7 || o.rdma_rnr_retry > 7)
    return make_error(errc::invalid_argument, "RDMA retry counts must be in [0, 7]");
  auto bad_wait = [](std::chrono::milliseconds t) {
    return t < std::chrono::milliseconds(10) || t > std::chrono::seconds(60);
  };
  if (bad_wait(o.rdma_flush_timeout) || bad_wait(o.rdma_expired_grace))
    return make_error(errc::invalid_argument,
                      "RDMA flush timeout and expired grace must be in [10 ms, 60 s]");
  if (o.rdma_preferred_devices.size() + o.rdma_fallback_devices.size() > rdma_devices_max)
    return make_error(errc::invalid_argument, "at most 16 RDMA devices may be named");
  std::set<std::string> seen;
  for (const auto* list : {&o.rdma_preferred_devices, &o.rdma_fallback_devices})
    for (const auto& name : *list) {
      if (name.empty() || name.size() > rdma_device_name_max)
        return make_error(errc::invalid_argument, "RDMA device names have 1 to 63 bytes");
      if (!seen.insert(name).second)
        return make_error(errc::invalid_argument, "RDMA device " + name + " is named twice");
    }
  return caf::none;
}

} // namespace

caf::error check_transfer_options(const transfer_options& options) {
  auto bad_slice = [](uint64_t n) { return n == 0 || n > slice_bytes_max; };
  if (bad_slice(options.slice_bytes) || bad_slice(options.tcp_slice_bytes) ||
      bad_slice(options.copy_slice_bytes))
    return make_error(errc::invalid_argument, "slice sizes must be in [1, 16 MiB]");
  if (options.tcp_connections_per_peer > 64)
    return make_error(errc::invalid_argument,
                      "TCP connections per peer must be in [1, 64], or 0 for one per two cores");
  if (options.tcp_peer_silence_max < std::chrono::milliseconds(10) ||
      options.tcp_peer_silence_max > std::chrono::minutes(10))
    return make_error(errc::invalid_argument,
                      "the TCP peer silence limit must be in [10 ms, 10 min]");
  // A connect that never ends would hold its slices until their deadline on every batch.
  if (options.connect_timeout < std::chrono::milliseconds(10) ||
      options.connect_timeout > std::chrono::minutes(10))
    return make_error(errc::invalid_argument, "the TCP connect timeout must be in [10 ms, 10 min]");
  if (options.slice_attempts_max == 0 || options.slice_attempts_max > 16)
    return make_error(errc::invalid_argument, "slice attempts must be in [1, 16]");
  return check_rdma_options(options);
}

} // namespace crescent::transport
