// The life of a reliable-connected queue pair in verbs terms, shared by both ends: create it,
// move it RESET -> INIT -> RTR -> RTS against the other end's endpoint, or to ERR to stop it.
#pragma once

#include "transport/rdma/rdma_device.hpp"
#include "transport/rdma/rdma_policy.hpp"

#include <caf/error.hpp>

namespace crescent::transport::rdma {

// Retransmission (link_options, from the engine's options): a try waits 4.096 us * 2^timeout
// for an acknowledgement, then is retried retry_count times. The default timeout 18 is about
// 1.07 s per try, so a peer whose NIC stops answering fails its work within about 8.6 s; less
// risks spurious failures under congestion (PFC pauses, incast), which are far costlier than
// noticing a dead peer late. rnr_retry 7 means "retry forever": no receives are ever posted,
// so receiver-not-ready never happens in this protocol.
inline constexpr uint8_t qp_min_rnr_timer = 12; // 0.64 ms
inline constexpr uint8_t qp_hop_limit = 64;

/// Gather entries of one work request, at most: a slice is one, but a WRITE that a fault
/// corrupts is gathered from three (the source around a changed copy of its window). NICs
/// that do RC offer far more (mlx5 30, rxe 32, siw 6).
inline constexpr uint32_t send_sge_max = 3;

/// A reliable-connected queue pair on `d` in RESET, with `send_depth` send slots and up to
/// send_sge_max gather entries per request; null with errno set on failure. Its completions go
/// to the device's queue.
ibv_qp* create_rc_qp(device& d, uint32_t send_depth);

/// RESET -> INIT on the device's port, granting the other end the access of `role`
/// (qp_access_flags: none for an initiator, remote READ and WRITE for an owner's end).
caf::error qp_to_init(ibv_qp* qp, const device& d, qp_role role);

/// INIT -> RTR -> RTS: connected to `remote`, sending from `local.psn`. The path MTU is the
/// smaller of both ports'; READ credits are what the other end can serve.
caf::error qp_to_rts(ibv_qp* qp, const device& d, const qp_endpoint& local,
                     const qp_endpoint& remote);

/// Any state -> ERR: the NIC stops the queue pair and flushes every outstanding request.
caf::error qp_to_error(ibv_qp* qp);

/// A random 24-bit initial packet sequence number.
uint32_t random_psn();

/// Refuses a remote endpoint that cannot be connected to from `d`: another link layer, or an
/// InfiniBand port in another subnet.
caf::error check_reachable(const device& d, const qp_endpoint& remote);

} // namespace crescent::transport::rdma
