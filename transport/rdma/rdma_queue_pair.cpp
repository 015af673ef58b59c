#include "transport/rdma/rdma_queue_pair.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_qp_setup.hpp"

#include <array>
#include <cassert>
#include <cerrno>
#include <cstring>

namespace crescent::transport::rdma {

namespace {

// Work requests posted with one ibv_post_send (one doorbell), at most.
constexpr size_t post_burst_max = 32;

} // namespace

void end_work(region_table& table, work& w, caf::error err) {
  assert(w.slice != nullptr);
  table.unpin(w.local_region);
  w.local.reset();
  complete_slice(*w.slice, std::move(err));
}

void end_all(region_table& table, endings& done) {
  for (auto& [w, err] : done)
    end_work(table, w, std::move(err));
  done.clear();
}

caf::expected<std::shared_ptr<queue_pair>> queue_pair::create(device& d, uint32_t depth,
                                                              uint32_t node) {
  if (!d.reserve(depth))
    return make_error(errc::no_space, "the completion queue of " + d.name() +
                                          " has no room for another queue pair");
  std::shared_ptr<queue_pair> qp{new queue_pair(d, depth, node)};
  errno = 0;
  qp->qp_ = create_rc_qp(d, depth);
  if (qp->qp_ == nullptr)
    return make_error(errc::unavailable, "cannot create a queue pair on " + d.name() + ": " +
                                             std::strerror(errno != 0 ? errno : EINVAL));
  if (auto err = qp_to_init(qp->qp_, d))
    return err;
  qp->number_ = qp->qp_->qp_num;
  qp->local_ = d.endpoint(qp->number_, random_psn());
  qp->slots_.resize(depth);
  for (uint32_t i = depth; i > 0; --i)
    qp->free_.push_back(i - 1);
  d.adopt(qp);
  return qp;
}

queue_pair::~queue_pair() {
  if (qp_ != nullptr)
    ibv_destroy_qp(qp_);
  dev_.release(depth_);
}

bool queue_pair::broken() const {
  std::lock_guard guard{mutex_};
  return state_ == state::broken;
}

caf::error queue_pair::connect(const qp_endpoint& remote, endings& out) {
  std::lock_guard guard{mutex_};
  if (state_ != state::connecting)
    return make_error(errc::io_error, "the queue pair broke while connecting");
  // Under the lock: a concurrent break must not interleave with these transitions.
  if (auto err = qp_to_rts(qp_, dev_, local_, remote))
    return err;
  state_ = state::ready;
  post_locked(out);
  return caf::none;
}

bool queue_pair::submit(work& w, endings& out) {
  std::lock_guard guard{mutex_};
  if (state_ == state::broken)
    return false;
  waiting_.push_back(std::move(w));
  post_locked(out);
  return true;
}

void queue_pair::post_locked(endings& out) {
  // Each burst takes at least one waiting request (posted, or ended if its batch is over).
  while (state_ == state::ready && !waiting_.empty() && !free_.empty())
    post_burst_locked(out);
}

// Posts up to post_burst_max waiting requests as one chain; returns how many were posted.
size_t queue_pair::post_burst_locked(endings& out) {
  std::array<ibv_send_wr, post_burst_max> wrs{};
  std::array<ibv_sge, post_burst_max> sges{};
  std::array<uint32_t, post_burst_max> used{};
  size_t n = 0;
  while (n < post_burst_max && !waiting_.empty() && !free_.empty()) {
    work w = std::move(waiting_.front());
    waiting_.pop_front();
    auto& b = *w.slice->batch;
    if (b.expired.load()) {
      out.emplace_back(std::move(w), make_error(errc::timeout, "the batch's deadline passed"));
      continue;
    }
    if (b.cancelled.load()) {
      out.emplace_back(std::move(w), make_error(errc::cancelled, "cancelled before it was sent"));
      continue;
    }
    const uint32_t slot = free_.back();
    free_.pop_back();
    const auto& s = *w.slice;
    sges[n] =
        ibv_sge{reinterpret_cast<uintptr_t>(s.local), static_cast<uint32_t>(s.length), w.lkey};
    auto& wr = wrs[n];
    wr.wr_id = slot;
    wr.sg_list = &sges[n];
    wr.num_sge = 1;
    wr.opcode = s.kind == op_kind::read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = w.remote_addr;
    wr.wr.rdma.rkey = w.rkey;
    wr.next = nullptr;
    if (n > 0)
      wrs[n - 1].next = &wr;
    used[n++] = slot;
    slots_[slot] = std::move(w);
  }
  if (n == 0)
    return 0;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_, wrs.data(), &bad);
  if (rc == 0)
    return n;
  // Requests from `bad` on were not posted: they end here; the queue pair is not trusted again.
  const size_t posted = bad == nullptr ? 0 : static_cast<size_t>(bad - wrs.data());
  for (size_t i = posted; i < n; ++i) {
    out.emplace_back(std::move(slots_[used[i]]),
                     make_error(errc::io_error, "posting to a queue pair on " + dev_.name() +
                                                    " failed: " + std::strerror(rc)));
    slots_[used[i]] = work{};
    free_.push_back(used[i]);
  }
  break_locked(make_error(errc::io_error, "a queue pair on " + dev_.name() + " refused work"), out);
  return posted;
}

queue_pair::finished queue_pair::complete(const ibv_wc& wc, endings& out) {
  std::lock_guard guard{mutex_};
  assert(wc.wr_id < slots_.size() && slots_[wc.wr_id].slice != nullptr &&
         "a completion for a request that is not in flight");
  finished f;
  if (wc.wr_id >= slots_.size() || slots_[wc.wr_id].slice == nullptr)
    return f;
  f.w = std::move(slots_[wc.wr_id]);
  slots_[wc.wr_id] = work{};
  free_.push_back(static_cast<uint32_t>(wc.wr_id));
  if (wc.status != IBV_WC_SUCCESS)
    // The NIC has moved the queue pair to ERR already; what waits goes elsewhere.
    break_locked(make_error(errc::io_error, "a queue pair to node " + std::to_string(node_) +
                                                " on " + dev_.name() +
                                                " broke: " + ibv_wc_status_str(wc.status)),
                 out);
  else
    post_locked(out);
  f.retire = take_retirement_locked();
  return f;
}

void queue_pair::break_locked(const caf::error& reason, endings& out) {
  if (state_ != state::broken) {
    state_ = state::broken;
    [[maybe_unused]] auto err = qp_to_error(qp_); // fails only for a queue pair already gone
  }
  for (auto& w : waiting_)
    out.emplace_back(std::move(w), reason);
  waiting_.clear();
}

bool queue_pair::take_retirement_locked() {
  if (state_ != state::broken || retired_ || free_.size() != slots_.size())
    return false;
  retired_ = true;
  return true;
}

bool queue_pair::break_with(const caf::error& reason, endings& out) {
  std::lock_guard guard{mutex_};
  break_locked(reason, out);
  return take_retirement_locked();
}

bool queue_pair::expire(const batch_state& b, endings& out) {
  std::lock_guard guard{mutex_};
  for (auto i = waiting_.begin(); i != waiting_.end();) {
    if (i->slice->batch != &b) {
      ++i;
      continue;
    }
    out.emplace_back(std::move(*i), make_error(errc::timeout, "the batch's deadline passed"));
    i = waiting_.erase(i);
  }
  bool in_flight = false;
  for (const auto& w : slots_)
    in_flight = in_flight || (w.slice != nullptr && w.slice->batch == &b);
  if (!in_flight)
    return false;
  // The only way to take requests back from a NIC: other batches' requests on this queue pair
  // flush too, and are retried on another one.
  break_locked(make_error(errc::io_error, "a queue pair to node " + std::to_string(node_) +
                                              " was reset for an expired batch"),
               out);
  return take_retirement_locked();
}

void queue_pair::abandon(const caf::error& reason, endings& out) {
  std::lock_guard guard{mutex_};
  if (qp_ != nullptr)
    ibv_destroy_qp(qp_);
  qp_ = nullptr;
  state_ = state::broken;
  retired_ = true;
  for (auto& w : waiting_)
    out.emplace_back(std::move(w), reason);
  waiting_.clear();
  for (uint32_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].slice != nullptr) {
      out.emplace_back(std::move(slots_[i]), reason);
      slots_[i] = work{};
      free_.push_back(i);
    }
}

} // namespace crescent::transport::rdma
