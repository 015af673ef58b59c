#include "transport/rdma/rdma_qp_setup.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_topology.hpp"

#include <algorithm>
#include <cstring>
#include <random>

namespace crescent::transport::rdma {

namespace {

caf::error modify_failed(const char* to, const device& d, int rc) {
  return make_error(errc::unavailable, std::string{"cannot move a queue pair on "} + d.name() +
                                           " to " + to + ": " + std::strerror(rc));
}

} // namespace

ibv_qp* create_rc_qp(device& d, uint32_t send_depth) {
  ibv_qp_init_attr init{};
  init.send_cq = d.cq();
  init.recv_cq = d.cq();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0; // every request is posted signaled, explicitly
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = 1; // receives are never posted; some providers refuse 0
  init.cap.max_send_sge = send_sge_max;
  init.cap.max_recv_sge = 1;
  return ibv_create_qp(d.pd(), &init);
}

static_assert(IBV_ACCESS_REMOTE_WRITE == access_remote_write &&
              IBV_ACCESS_REMOTE_READ == access_remote_read);

caf::error qp_to_init(ibv_qp* qp, const device& d, qp_role role) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = d.port().num;
  a.qp_access_flags = static_cast<unsigned>(qp_access_flags(role));
  const int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  if (int rc = ibv_modify_qp(qp, &a, mask); rc != 0)
    return modify_failed("INIT", d, rc);
  return caf::none;
}

namespace {

// Where the other end is: InfiniBand in one subnet by LID; RoCE (and anything routed) through
// a global route header from our chosen source GID to its GID.
void set_address(ibv_ah_attr& ah, const device& d, const qp_endpoint& remote) {
  ah.port_num = d.port().num;
  ah.sl = effective_service_level(d.port().link_layer, d.link().service_level);
  ah.src_path_bits = 0;
  if (d.port().link_layer == link_infiniband) {
    ah.dlid = remote.lid;
    ah.is_global = 0;
    return;
  }
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, remote.gid, sizeof(remote.gid));
  ah.grh.sgid_index = static_cast<uint8_t>(d.address().gid_index);
  ah.grh.hop_limit = qp_hop_limit;
  ah.grh.traffic_class = d.link().traffic_class;
  ah.grh.flow_label = 0;
}

} // namespace

caf::error qp_to_rts(ibv_qp* qp, const device& d, const qp_endpoint& local,
                     const qp_endpoint& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(local.mtu, remote.mtu));
  a.dest_qp_num = remote.qp_num;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = local.rd_atomic_dest;
  a.min_rnr_timer = qp_min_rnr_timer;
  set_address(a.ah_attr, d, remote);
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int rc = ibv_modify_qp(qp, &a, mask); rc != 0)
    return modify_failed("RTR", d, rc);
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = d.link().qp_timeout;
  a.retry_cnt = d.link().retry_count;
  a.rnr_retry = d.link().rnr_retry;
  a.sq_psn = local.psn;
  // Never more READs in flight than the other end can serve: it would answer with errors.
  a.max_rd_atomic = std::min(local.rd_atomic_init, remote.rd_atomic_dest);
  mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
         IBV_QP_MAX_QP_RD_ATOMIC;
  if (int rc = ibv_modify_qp(qp, &a, mask); rc != 0)
    return modify_failed("RTS", d, rc);
  return caf::none;
}

caf::error qp_to_error(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE); rc != 0)
    return make_error(errc::io_error,
                      std::string{"cannot move a queue pair to ERR: "} + std::strerror(rc));
  return caf::none;
}

uint32_t random_psn() {
  thread_local std::mt19937 rng{std::random_device{}()};
  return rng() & qp_num_mask;
}

caf::error check_reachable(const device& d, const qp_endpoint& remote) {
  if (!ports_reachable(d.port().link_layer, d.address().gid.raw, remote.link_layer, remote.gid))
    return make_error(errc::unavailable, d.name() + " cannot reach " + name_of(remote.device) +
                                             ": another link layer or InfiniBand subnet");
  return caf::none;
}

} // namespace crescent::transport::rdma
