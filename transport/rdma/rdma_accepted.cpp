#include "transport/rdma/rdma_accepted.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_qp_setup.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

namespace crescent::transport::rdma {

caf::expected<qp_endpoint> accepted_qps::accept(device& d, const qp_endpoint& initiator,
                                                const void* owner) {
  if (auto err = check_reachable(d, initiator))
    return err;
  {
    std::lock_guard guard{mutex_};
    if (auto err = quota_.take(owner))
      return err;
  }
  auto give_back = [&] {
    std::lock_guard guard{mutex_};
    quota_.give_back(owner);
  };
  // A responder never posts: one send slot is all it needs.
  errno = 0;
  ibv_qp* qp = create_rc_qp(d, 1);
  if (qp == nullptr) {
    give_back();
    return make_error(errc::unavailable, "cannot create a queue pair on " + d.name() + ": " +
                                             std::strerror(errno != 0 ? errno : EINVAL));
  }
  const qp_endpoint local = d.endpoint(qp->qp_num, random_psn());
  caf::error err = qp_to_init(qp, d, qp_role::responder);
  if (!err)
    err = qp_to_rts(qp, d, local, initiator);
  if (err) {
    ibv_destroy_qp(qp);
    give_back();
    return err;
  }
  std::lock_guard guard{mutex_};
  qps_[{&d, qp->qp_num}] = entry{owner, qp};
  return local;
}

caf::error accepted_qps::release_one(const void* owner, const device& d, uint32_t qp_num) {
  ibv_qp* gone = nullptr;
  {
    std::lock_guard guard{mutex_};
    auto i = qps_.find({&d, qp_num});
    if (i == qps_.end() || i->second.owner != owner)
      return make_error(errc::not_found, "this connection holds no queue pair " +
                                             std::to_string(qp_num) + " on " + d.name());
    gone = i->second.qp;
    quota_.give_back(owner);
    qps_.erase(i);
  }
  ibv_destroy_qp(gone); // outside the lock: it may wait for the NIC
  return caf::none;
}

bool accepted_qps::drop_failed(const device& d, uint32_t qp_num) {
  ibv_qp* gone = nullptr;
  {
    std::lock_guard guard{mutex_};
    auto i = qps_.find({&d, qp_num});
    if (i == qps_.end())
      return false;
    gone = i->second.qp;
    quota_.give_back(i->second.owner);
    qps_.erase(i);
  }
  // The initiator's end fails with its next work, and is replaced; this one would only hold
  // a place in its connection's share.
  ibv_destroy_qp(gone);
  return true;
}

void accepted_qps::release(const void* owner) {
  std::vector<ibv_qp*> gone;
  {
    std::lock_guard guard{mutex_};
    for (auto i = qps_.begin(); i != qps_.end();) {
      if (i->second.owner != owner) {
        ++i;
        continue;
      }
      gone.push_back(i->second.qp);
      i = qps_.erase(i);
    }
    quota_.give_back_all(owner);
  }
  for (auto* qp : gone)
    ibv_destroy_qp(qp);
}

void accepted_qps::clear() {
  std::unordered_map<key, entry, key_hash> gone;
  {
    std::lock_guard guard{mutex_};
    gone.swap(qps_);
    quota_.clear();
  }
  for (auto& kv : gone)
    ibv_destroy_qp(kv.second.qp);
}

size_t accepted_qps::held(const void* owner) const {
  std::lock_guard guard{mutex_};
  return quota_.held(owner);
}

} // namespace crescent::transport::rdma
