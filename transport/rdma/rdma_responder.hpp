// What the TCP data-plane server asks of the RDMA path when a peer describes a region, connects
// a queue pair or releases one (rdma_wire.hpp). The server checks handles itself (a connect
// comes with one, checked before accept is called); this answers only what RDMA adds. Absent (a
// null pointer) where the engine has no RDMA path: the server then describes regions without keys
// and refuses connects as unavailable.
#pragma once

#include "transport/rdma/rdma_wire.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <vector>

namespace crescent::transport::rdma {

class responder {
 public:
  virtual ~responder() = default;

  /// The remote keys of a region, the preferred device for its memory first. Called while the
  /// server holds the region pinned, so its registrations exist.
  virtual std::vector<region_key> keys_of(uint64_t region_id) = 0;

  /// Creates a queue pair on the requested device, connected to the initiator's, and returns
  /// its endpoint. It lives until release_one names it, release(owner), or the NIC reports it
  /// failed. no_space past the per-connection or total limit (accepted_qps).
  virtual caf::expected<qp_endpoint> accept(const connect_request& req, const void* owner) = 0;

  /// Destroys the queue pair the request names (device, number) accepted for `owner`;
  /// not_found if `owner` holds none such (a peer cannot release another connection's).
  virtual caf::error release_one(const void* owner, const release_request& req) = 0;

  /// Destroys every queue pair accepted for `owner` (a server connection that ended).
  virtual void release(const void* owner) = 0;
};

} // namespace crescent::transport::rdma
