#include "transport/rdma/rdma_accepted.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_qp_setup.hpp"

#include <cerrno>
#include <cstring>

namespace crescent::transport::rdma {

bool accepted_qps::reserve(const void* owner) {
  std::lock_guard guard{mutex_};
  auto& mine = reserved_[owner];
  if (total_ >= total_max || mine >= per_owner_max)
    return false;
  ++mine;
  ++total_;
  return true;
}

void accepted_qps::unreserve(const void* owner) {
  std::lock_guard guard{mutex_};
  auto i = reserved_.find(owner);
  if (i == reserved_.end())
    return;
  --total_;
  if (--i->second == 0)
    reserved_.erase(i);
}

caf::expected<qp_endpoint> accepted_qps::accept(device& d, const qp_endpoint& initiator,
                                                const void* owner) {
  if (auto err = check_reachable(d, initiator))
    return err;
  if (!reserve(owner))
    return make_error(errc::no_space, "too many RDMA queue pairs are connected here");
  // A responder never posts: one send slot is all it needs.
  errno = 0;
  ibv_qp* qp = create_rc_qp(d, 1);
  if (qp == nullptr) {
    unreserve(owner);
    return make_error(errc::unavailable, "cannot create a queue pair on " + d.name() + ": " +
                                             std::strerror(errno != 0 ? errno : EINVAL));
  }
  const qp_endpoint local = d.endpoint(qp->qp_num, random_psn());
  caf::error err = qp_to_init(qp, d);
  if (!err)
    err = qp_to_rts(qp, d, local, initiator);
  if (err) {
    ibv_destroy_qp(qp);
    unreserve(owner);
    return err;
  }
  std::lock_guard guard{mutex_};
  by_owner_[owner].push_back(qp);
  return local;
}

void accepted_qps::release(const void* owner) {
  std::vector<ibv_qp*> gone;
  {
    std::lock_guard guard{mutex_};
    auto i = by_owner_.find(owner);
    if (i != by_owner_.end()) {
      gone = std::move(i->second);
      by_owner_.erase(i);
    }
    if (auto r = reserved_.find(owner); r != reserved_.end()) {
      total_ -= r->second;
      reserved_.erase(r);
    }
  }
  for (auto* qp : gone)
    ibv_destroy_qp(qp);
}

void accepted_qps::clear() {
  std::unordered_map<const void*, std::vector<ibv_qp*>> gone;
  {
    std::lock_guard guard{mutex_};
    gone.swap(by_owner_);
    reserved_.clear();
    total_ = 0;
  }
  for (auto& kv : gone)
    for (auto* qp : kv.second)
      ibv_destroy_qp(qp);
}

} // namespace crescent::transport::rdma
