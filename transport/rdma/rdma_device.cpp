#include "transport/rdma/rdma_device.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_queue_pair.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace crescent::transport::rdma {

static_assert(IBV_LINK_LAYER_INFINIBAND == link_infiniband &&
              IBV_LINK_LAYER_ETHERNET == link_ethernet);
static_assert(IBV_MTU_256 == mtu_min && IBV_MTU_4096 == mtu_max);

namespace {

caf::error verbs_error(const std::string& what, int err) {
  return make_error(errc::unavailable, what + ": " + std::strerror(err));
}

// Empty polls before the poller arms the completion channel and sleeps: completions tend to
// come in streams, and a wake-up through the channel costs a system call and a context switch.
constexpr int spins_before_sleep = 64;

} // namespace

caf::expected<std::unique_ptr<device>> device::open(ibv_device* dev, const rdma_device& info,
                                                    const link_options& link) {
  std::unique_ptr<device> d{new device};
  d->info_ = info;
  d->link_ = link;
  d->ctx_ = ibv_open_device(dev);
  if (d->ctx_ == nullptr)
    return verbs_error("cannot open " + info.name, errno);
  if (int rc = ibv_query_device(d->ctx_, &d->attr_); rc != 0)
    return verbs_error("cannot query " + info.name, rc);
  auto port = choose_port(d->ctx_, info.name, d->attr_.phys_port_cnt, link.gid_index);
  if (!port)
    return std::move(port.error());
  d->port_ = *port;
  d->pd_ = ibv_alloc_pd(d->ctx_);
  if (d->pd_ == nullptr)
    return verbs_error("cannot allocate a protection domain on " + info.name, errno);
  d->channel_ = ibv_create_comp_channel(d->ctx_);
  if (d->channel_ == nullptr)
    return verbs_error("cannot create a completion channel on " + info.name, errno);
  // Non-blocking: the poller waits in poll() (with its wake-up eventfd), never in the channel.
  fcntl(d->channel_->fd, F_SETFL, fcntl(d->channel_->fd, F_GETFL) | O_NONBLOCK);
  const int entries = std::min(d->attr_.max_cqe, cq_entries_max);
  d->cq_ = ibv_create_cq(d->ctx_, entries, nullptr, d->channel_, 0);
  if (d->cq_ == nullptr)
    return verbs_error("cannot create a completion queue on " + info.name, errno);
  d->cq_room_ = std::min(entries, d->cq_->cqe);
  d->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (d->wake_fd_ < 0)
    return verbs_error("eventfd", errno);
  return d;
}

device::~device() {
  stop();
  {
    // Queue pairs go before the completion queue and protection domain they use.
    std::lock_guard guard{qps_mutex_};
    qps_.clear();
  }
  if (cq_ != nullptr)
    ibv_destroy_cq(cq_);
  if (channel_ != nullptr)
    ibv_destroy_comp_channel(channel_);
  if (pd_ != nullptr)
    ibv_dealloc_pd(pd_);
  if (ctx_ != nullptr)
    ibv_close_device(ctx_);
  if (wake_fd_ >= 0)
    close(wake_fd_);
}

uint8_t device::rd_atomic_init() const {
  return static_cast<uint8_t>(std::clamp(attr_.max_qp_init_rd_atom, 1, 16));
}

uint8_t device::rd_atomic_dest() const {
  return static_cast<uint8_t>(std::clamp(attr_.max_qp_rd_atom, 1, 16));
}

qp_endpoint device::endpoint(uint32_t qp_num, uint32_t psn) const {
  qp_endpoint e{};
  set_name(e.device, info_.name);
  std::memcpy(e.gid, port_.gid.raw, sizeof(e.gid));
  e.qp_num = qp_num;
  e.psn = psn;
  e.lid = port_.lid;
  e.port = port_.num;
  e.link_layer = port_.link_layer;
  e.mtu = static_cast<uint8_t>(port_.mtu);
  e.rd_atomic_init = rd_atomic_init();
  e.rd_atomic_dest = rd_atomic_dest();
  return e;
}

rdma_port_info device::advertised() const {
  rdma_port_info p;
  p.device = info_.name;
  p.port = port_.num;
  p.link_layer = port_.link_layer;
  p.lid = port_.lid;
  std::copy(std::begin(port_.gid.raw), std::end(port_.gid.raw), p.gid.begin());
  return p;
}

bool device::reserve(uint32_t entries) {
  if (cq_room_.fetch_sub(entries) >= static_cast<int64_t>(entries))
    return true;
  cq_room_.fetch_add(entries);
  return false;
}

void device::release(uint32_t entries) {
  cq_room_.fetch_add(entries);
}

void device::adopt(const std::shared_ptr<queue_pair>& qp) {
  std::lock_guard guard{qps_mutex_};
  qps_[qp->number()] = qp;
}

std::shared_ptr<queue_pair> device::find(uint32_t qp_num) const {
  std::lock_guard guard{qps_mutex_};
  auto i = qps_.find(qp_num);
  return i == qps_.end() ? nullptr : i->second;
}

std::shared_ptr<queue_pair> device::retire(uint32_t qp_num) {
  std::lock_guard guard{qps_mutex_};
  auto i = qps_.find(qp_num);
  if (i == qps_.end())
    return nullptr;
  auto qp = std::move(i->second);
  qps_.erase(i);
  return qp;
}

std::vector<std::shared_ptr<queue_pair>> device::queue_pairs() const {
  std::lock_guard guard{qps_mutex_};
  std::vector<std::shared_ptr<queue_pair>> out;
  for (const auto& kv : qps_)
    out.push_back(kv.second);
  return out;
}

void device::start(completion_handler handler) {
  handler_ = std::move(handler);
  poller_ = std::thread([this] { poll_loop(); });
}

void device::stop() {
  if (stopping_.exchange(true))
    return;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  }
  if (poller_.joinable())
    poller_.join();
}

void device::poll_loop() {
  std::array<ibv_wc, poll_batch> wcs;
  int idle = 0;
  while (!stopping_.load(std::memory_order_relaxed)) {
    const int n = ibv_poll_cq(cq_, poll_batch, wcs.data());
    if (n < 0) {
      // The queue itself broke (an overrun cannot happen: see reserve): nothing more will come.
      failed_ = true;
      handler_(*this, {}, true);
      return;
    }
    if (n > 0) {
      idle = 0;
      handler_(*this, {wcs.data(), static_cast<size_t>(n)}, false);
      continue;
    }
    if (++idle < spins_before_sleep)
      continue;
    idle = 0;
    // Arm, then look once more: a completion that came before arming raises no event.
    ibv_req_notify_cq(cq_, 0);
    const int late = ibv_poll_cq(cq_, poll_batch, wcs.data());
    if (late > 0)
      handler_(*this, {wcs.data(), static_cast<size_t>(late)}, false);
    else if (late == 0 && !wait_for_event())
      return;
  }
}

// Sleeps until the completion channel or the wake-up eventfd fires; false to stop.
bool device::wait_for_event() {
  pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (poll(fds, 2, -1) < 0)
    if (errno != EINTR)
      return false;
  if ((fds[0].revents & POLLIN) != 0) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &context) == 0)
      ibv_ack_cq_events(cq, 1); // every event must be acknowledged before the CQ is destroyed
  }
  return !stopping_.load();
}

caf::expected<std::vector<std::unique_ptr<device>>>
open_devices(const std::vector<std::string>& names, const link_options& link) {
  auto found = rdma_devices();
  if (!found)
    return std::move(found.error());
  for (const auto& name : names)
    if (std::none_of(found->begin(), found->end(), [&](const auto& d) { return d.name == name; }))
      return make_error(errc::invalid_argument,
                        "RDMA device " + name + " named in the options does not exist");
  // Before any memory registration: on kernels that do not copy pinned pages at fork (older
  // than 5.12 or so), this keeps registered pages out of children, so that a fork (and exec) of
  // this process cannot leave the NIC writing into a page the parent no longer maps. On newer
  // kernels it does nothing. Memory is registered only after this, so it is never too late.
  [[maybe_unused]] const int fork_safety = ibv_fork_init();
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr)
    return make_error(errc::unavailable, "ibv_get_device_list failed");
  std::vector<std::unique_ptr<device>> out;
  std::string reasons;
  auto wanted = names;
  if (wanted.empty())
    for (const auto& d : *found)
      wanted.push_back(d.name);
  for (const auto& name : wanted) {
    if (out.size() >= rdma_devices_max)
      break;
    auto info = std::find_if(found->begin(), found->end(), [&](auto& d) { return d.name == name; });
    ibv_device* dev = nullptr;
    for (int i = 0; i < count && dev == nullptr; ++i)
      if (name == ibv_get_device_name(list[i]))
        dev = list[i];
    if (info == found->end() || dev == nullptr)
      continue; // gone since discovery
    auto opened = device::open(dev, *info, link);
    if (opened)
      out.push_back(std::move(*opened));
    else
      reasons += (reasons.empty() ? "" : "; ") + describe(opened.error());
  }
  ibv_free_device_list(list);
  if (out.empty())
    return make_error(errc::unavailable, "no usable RDMA device: " + reasons);
  return out;
}

} // namespace crescent::transport::rdma
