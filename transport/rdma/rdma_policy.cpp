#include "transport/rdma/rdma_policy.hpp"

#include "transport/rdma/rdma_wire.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::transport::rdma {

// -- backoff
// ---------------------------------------------------------------------------------------

backoff::backoff(duration first, duration max) : first_(first), max_(max), next_(first) {
  assert(first > duration::zero() && max >= first);
}

void backoff::failed(time_point now) {
  until_ = std::max(until_, now + next_);
  next_ = std::min(max_, next_ * 2);
  ++failures_;
}

void backoff::succeeded() {
  next_ = first_;
  failures_ = 0;
}

// -- completions
// -----------------------------------------------------------------------------------

wc_outcome judge_completion(wc_kind kind, bool ever_succeeded, errc broken_code, bool expired,
                            bool cancelled, const std::string& context) {
  wc_outcome out;
  if (kind == wc_kind::success) {
    out.first_success = !ever_succeeded;
    return out;
  }
  // The path's health does not depend on the batch: a fresh queue pair that fails on the wire
  // says the device pair cannot carry work now, even if its batch has expired meanwhile.
  out.cool_down = kind == wc_kind::path && !ever_succeeded;
  out.invalidate = kind == wc_kind::remote_access;
  if (expired) {
    out.err = make_error(errc::timeout, "the batch's deadline passed");
  } else if (cancelled) {
    out.err = make_error(errc::cancelled, "cancelled while in flight");
  } else if (out.cool_down) {
    out.err = make_error(errc::unavailable,
                         context + " (a new queue pair that never completed work: its device "
                                   "pair is left alone for a while)");
  } else if (kind == wc_kind::flushed) {
    assert(broken_code == errc::io_error || broken_code == errc::unavailable);
    out.err = make_error(broken_code, context);
  } else {
    out.err = make_error(errc::io_error, context); // retried on another queue pair
  }
  return out;
}

// -- sweeps
// ----------------------------------------------------------------------------------------

sweep_action decide_sweep(size_t in_flight, std::optional<clock_type::time_point> broken_at,
                          std::optional<clock_type::time_point> oldest_expired_deadline,
                          clock_type::time_point now, const sweep_limits& limits) {
  if (in_flight == 0)
    return sweep_action::none; // nothing the NIC could still be doing
  if (broken_at)
    return now - *broken_at >= limits.flush_timeout ? sweep_action::destroy : sweep_action::none;
  if (oldest_expired_deadline && now - *oldest_expired_deadline >= limits.expired_grace)
    return sweep_action::reset;
  return sweep_action::none;
}

// -- quotas
// ----------------------------------------------------------------------------------------

caf::error qp_quota::take(const void* owner) {
  const size_t mine = held(owner);
  if (mine >= per_owner_max_)
    return make_error(errc::no_space,
                      "this control connection holds " + std::to_string(mine) +
                          " RDMA queue pairs here, the most one connection may hold (" +
                          std::to_string(per_owner_max_) + "); release some first");
  if (total_ >= total_max_)
    return make_error(errc::no_space, "this process serves " + std::to_string(total_) +
                                          " RDMA queue pairs, the most it serves at once (" +
                                          std::to_string(total_max_) + ")");
  ++held_[owner];
  ++total_;
  return caf::none;
}

void qp_quota::give_back(const void* owner) {
  auto i = held_.find(owner);
  assert(i != held_.end() && i->second > 0 && "giving back a queue pair never taken");
  if (i == held_.end())
    return;
  --total_;
  if (--i->second == 0)
    held_.erase(i);
}

void qp_quota::give_back_all(const void* owner) {
  auto i = held_.find(owner);
  if (i == held_.end())
    return;
  total_ -= i->second;
  held_.erase(i);
}

void qp_quota::clear() {
  held_.clear();
  total_ = 0;
}

size_t qp_quota::held(const void* owner) const {
  auto i = held_.find(owner);
  return i == held_.end() ? 0 : i->second;
}

// -- links
// -----------------------------------------------------------------------------------------

uint8_t effective_service_level(uint8_t link_layer, uint8_t service_level) {
  constexpr uint8_t infiniband_max = 15;
  constexpr uint8_t roce_max = 7; // 802.1p priorities
  return std::min(service_level, link_layer == link_ethernet ? roce_max : infiniband_max);
}

int qp_access_flags(qp_role role) {
  return role == qp_role::initiator ? 0 : access_remote_read | access_remote_write;
}

std::string unsupported_transport(int transport_type) {
  switch (transport_type) {
  case transport_infiniband:
    return {};
  case transport_iwarp:
    return "an iWARP device: its queue pairs are connected through the RDMA connection "
           "manager, not by hand as this path does";
  case transport_usnic:
  case transport_usnic_udp:
    return "a usNIC device: it has no RDMA READ or WRITE";
  default:
    return "a device of an unknown transport (" + std::to_string(transport_type) + ")";
  }
}

// -- a WRITE that a fault corrupts --------------------------------------------------------------

gather_list gather_around(uint64_t source, uint64_t length, uint32_t lkey, uint64_t at,
                          uint64_t window, uint64_t changed, uint32_t changed_lkey) {
  assert(at <= length && window <= length - at && length <= UINT32_MAX);
  gather_list g;
  auto add = [&](uint64_t address, uint64_t bytes, uint32_t key) {
    if (bytes > 0)
      g.parts[g.count++] = {address, static_cast<uint32_t>(bytes), key};
  };
  add(source, at, lkey);
  add(changed, window, changed_lkey);
  add(source + at + window, length - at - window, lkey);
  return g;
}

} // namespace crescent::transport::rdma
