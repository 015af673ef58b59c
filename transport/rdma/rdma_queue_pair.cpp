#include "transport/rdma/rdma_queue_pair.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_qp_setup.hpp"

#include <array>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace crescent::transport::rdma {

namespace {

// Work requests posted with one ibv_post_send (one doorbell), at most.
constexpr size_t post_burst_max = 32;

uint32_t next_instance() {
  static std::atomic<uint32_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%x", v);
  return buf;
}

} // namespace

void end_work(region_table& table, work& w, caf::error err) {
  assert(w.slice != nullptr);
  auto& s = *w.slice;
  if (!err && s.kind == op_kind::read && s.fault == slice_fault::corrupt) // injected
    err = corrupt_landed(s.local, s.length, s.local_location);            // still pinned
  w.local.reset();
  table.unpin(w.local_region);
  complete_slice(s, std::move(err));
}

void end_all(region_table& table, endings& done) {
  for (auto& [w, err] : done)
    end_work(table, w, std::move(err));
  done.clear();
}

wc_kind kind_of(ibv_wc_status status) {
  switch (status) {
  case IBV_WC_SUCCESS:
    return wc_kind::success;
  case IBV_WC_WR_FLUSH_ERR:
    return wc_kind::flushed;
  case IBV_WC_REM_ACCESS_ERR:
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR:
    return wc_kind::remote_access;
  default:
    return wc_kind::path;
  }
}

queue_pair::queue_pair(device& d, uint32_t depth, uint32_t node,
                       std::shared_ptr<path_health> health)
    : dev_(d), depth_(depth), node_(node), health_(std::move(health)), instance_(next_instance()) {}

caf::expected<std::shared_ptr<queue_pair>>
queue_pair::create(device& d, uint32_t depth, uint32_t node, std::shared_ptr<path_health> health) {
  if (!d.reserve(depth))
    return make_error(errc::no_space, "the completion queue of " + d.name() +
                                          " has no room for another queue pair");
  std::shared_ptr<queue_pair> qp{new queue_pair(d, depth, node, std::move(health))};
  errno = 0;
  qp->qp_ = create_rc_qp(d, depth);
  if (qp->qp_ == nullptr)
    return make_error(errc::unavailable, "cannot create a queue pair on " + d.name() + ": " +
                                             std::strerror(errno != 0 ? errno : EINVAL));
  if (auto err = qp_to_init(qp->qp_, d, qp_role::initiator))
    return err;
  qp->number_ = qp->qp_->qp_num;
  qp->local_ = d.endpoint(qp->number_, random_psn());
  qp->slots_.resize(depth);
  for (uint32_t i = depth; i > 0; --i)
    qp->free_.push_back(i - 1);
  if (!d.adopt(qp))
    return make_error(errc::unavailable, d.name() + " has failed");
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

std::optional<queue_pair::remote_end> queue_pair::remote() const {
  std::lock_guard guard{mutex_};
  return remote_;
}

caf::error queue_pair::connect(const qp_endpoint& remote, uint64_t generation, endings& out) {
  std::lock_guard guard{mutex_};
  if (state_ != state::connecting)
    return make_error(errc::io_error, "the queue pair broke while connecting");
  // Under the lock: a concurrent break must not interleave with these transitions.
  if (auto err = qp_to_rts(qp_, dev_, local_, remote))
    return err; // the caller releases the owner's end
  // Connected: from now on the owner's end is released when this one is replaced.
  remote_ = remote_end{name_of(remote.device), remote.qp_num, generation};
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
  std::array<std::array<ibv_sge, send_sge_max>, post_burst_max> sges{};
  std::array<uint32_t, post_burst_max> used{};
  size_t n = 0;
  while (n < post_burst_max && !waiting_.empty() && !free_.empty()) {
    work w = std::move(waiting_.front());
    waiting_.pop_front();
    auto& b = *w.slice->batch;
    if (b.expired.load()) {
      out.emplace_back(std::move(w), deadline_passed());
      continue;
    }
    if (b.cancelled.load()) {
      out.emplace_back(std::move(w), make_error(errc::cancelled, "cancelled before it was sent"));
      continue;
    }
    const auto& s = *w.slice;
    const int parts = gather_locked(w, sges[n]);
    if (parts == 0) {
      out.emplace_back(std::move(w), make_error(errc::unavailable,
                                                "cannot register the bytes of an injected "
                                                "corruption with " +
                                                    dev_.name() + ": " + std::strerror(errno)));
      continue;
    }
    const uint32_t slot = free_.back();
    free_.pop_back();
    auto& wr = wrs[n];
    wr.wr_id = wr_id(slot);
    wr.sg_list = sges[n].data();
    wr.num_sge = parts;
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

// The gather list of the work's request: the slice, or for a WRITE that a fault corrupts the
// source around its changed window (registered here, with this queue pair's device). 0 if that
// registration fails (errno says why).
int queue_pair::gather_locked(work& w, std::array<ibv_sge, send_sge_max>& sge) {
  const auto& s = *w.slice;
  const auto source = reinterpret_cast<uintptr_t>(s.local);
  if (!w.changed) {
    sge[0] = ibv_sge{source, static_cast<uint32_t>(s.length), w.lkey};
    return 1;
  }
  auto& c = *w.changed;
  errno = 0;
  if (c.mr == nullptr) // local read access only: the NIC gathers from it
    c.mr = ibv_reg_mr(dev_.pd(), c.bytes.data(), c.bytes.size(), 0);
  if (c.mr == nullptr) {
    if (errno == 0)
      errno = EINVAL;
    return 0;
  }
  const auto win = corrupt_window_of(s.length);
  const auto g = gather_around(source, s.length, w.lkey, win.at, win.length,
                               reinterpret_cast<uintptr_t>(c.bytes.data()), c.mr->lkey);
  static_assert(std::tuple_size_v<decltype(g.parts)> <= send_sge_max);
  for (uint32_t i = 0; i < g.count; ++i)
    sge[i] = ibv_sge{g.parts[i].address, g.parts[i].length, g.parts[i].lkey};
  return static_cast<int>(g.count);
}

std::string queue_pair::context_locked(const work& w, const ibv_wc& wc) const {
  const auto& s = *w.slice;
  return std::string{"RDMA "} + (s.kind == op_kind::read ? "READ" : "WRITE") + " of " +
         std::to_string(s.length) + " bytes with node " + std::to_string(node_) + " through " +
         dev_.name() + " failed: " + ibv_wc_status_str(wc.status) + " (vendor error " +
         hex(wc.vendor_err) + ")";
}

queue_pair::finished queue_pair::complete(const ibv_wc& wc, endings& out) {
  std::lock_guard guard{mutex_};
  finished f;
  const auto slot = static_cast<uint32_t>(wc.wr_id & 0xffffffffu);
  if ((wc.wr_id >> 32) != instance_ || slot >= slots_.size() || slots_[slot].slice == nullptr)
    return f; // not a request in flight here: a stale completion of an earlier queue pair
  f.w = std::move(slots_[slot]);
  slots_[slot] = work{};
  free_.push_back(slot);
  const auto& b = *f.w.slice->batch;
  const wc_kind kind = kind_of(wc.status);
  auto outcome =
      judge_completion(kind, ever_succeeded_, broken_code_, b.expired.load(), b.cancelled.load(),
                       kind == wc_kind::success ? std::string{} : context_locked(f.w, wc));
  if (outcome.first_success) {
    ever_succeeded_ = true;
    if (health_)
      health_->succeeded();
  }
  if (outcome.cool_down && health_)
    health_->failed(clock_type::now());
  if (outcome.cool_down)
    broken_code_ = errc::unavailable; // what flushes after it also moves on to the next path
  f.err = std::move(outcome.err);
  f.invalidate = outcome.invalidate;
  if (kind != wc_kind::success)
    // The NIC has moved the queue pair to ERR already; what waits goes elsewhere.
    break_locked(make_error(broken_code_, "a queue pair to node " + std::to_string(node_) + " on " +
                                              dev_.name() +
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
    broken_at_ = clock_type::now();
    if (is(reason, errc::unavailable))
      broken_code_ = errc::unavailable;
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

bool queue_pair::fail(const caf::error& why, endings& out) {
  std::lock_guard guard{mutex_};
  if (state_ == state::broken)
    return take_retirement_locked();
  errc code = errc::io_error;
  if (!ever_succeeded_) {
    if (health_)
      health_->failed(clock_type::now());
    code = errc::unavailable;
  }
  break_locked(make_error(code, "a queue pair to node " + std::to_string(node_) +
                                    " failed: " + describe(why)),
               out);
  return take_retirement_locked();
}

void queue_pair::expire(const batch_state& b, endings& out) {
  std::lock_guard guard{mutex_};
  for (auto i = waiting_.begin(); i != waiting_.end();) {
    if (i->slice->batch != &b) {
      ++i;
      continue;
    }
    out.emplace_back(std::move(*i), deadline_passed());
    i = waiting_.erase(i);
  }
}

bool queue_pair::sweep(clock_type::time_point now, const sweep_limits& limits, endings& out) {
  std::lock_guard guard{mutex_};
  if (retired_)
    return false;
  const size_t in_flight = slots_.size() - free_.size();
  // Broken and drained but not retired (a post that failed in submit, say): nothing else would
  // ever retire it.
  if (state_ == state::broken && in_flight == 0)
    return take_retirement_locked();
  std::optional<clock_type::time_point> oldest_expired;
  if (in_flight > 0 && state_ != state::broken)
    for (const auto& w : slots_)
      if (w.slice != nullptr && w.slice->batch->expired.load() &&
          (!oldest_expired || w.slice->batch->deadline < *oldest_expired))
        oldest_expired = w.slice->batch->deadline;
  switch (decide_sweep(in_flight, state_ == state::broken ? broken_at_ : std::nullopt,
                       oldest_expired, now, limits)) {
  case sweep_action::none:
    return false;
  case sweep_action::reset:
    break_locked(make_error(errc::io_error,
                            "a queue pair to node " + std::to_string(node_) + " on " + dev_.name() +
                                " was reset: work of an expired batch was still " + "in flight " +
                                std::to_string(limits.expired_grace.count()) +
                                " ms after its deadline"),
                 out);
    return take_retirement_locked();
  case sweep_action::destroy:
    destroy_locked(
        make_error(errc::io_error, "a broken queue pair to node " + std::to_string(node_) + " on " +
                                       dev_.name() + " did not flush its work within " +
                                       std::to_string(limits.flush_timeout.count()) + " ms"),
        out);
    return true;
  }
  return false;
}

// Destroys the verbs queue pair: when ibv_destroy_qp returns the NIC no longer touches the
// buffers of its work, which may then end.
void queue_pair::destroy_locked(const caf::error& reason, endings& out) {
  if (qp_ != nullptr)
    ibv_destroy_qp(qp_);
  qp_ = nullptr;
  if (state_ != state::broken)
    broken_at_ = clock_type::now();
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

void queue_pair::abandon(const caf::error& reason, endings& out) {
  std::lock_guard guard{mutex_};
  destroy_locked(reason, out);
}

} // namespace crescent::transport::rdma
