#include "transport/rdma/rdma_device.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_queue_pair.hpp"
#include "transport/thread_name.hpp"

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
  d->address_ = {port->lid, port->gid_index, port->gid};
  d->pd_ = ibv_alloc_pd(d->ctx_);
  if (d->pd_ == nullptr)
    return verbs_error("cannot allocate a protection domain on " + info.name, errno);
  d->channel_ = ibv_create_comp_channel(d->ctx_);
  if (d->channel_ == nullptr)
    return verbs_error("cannot create a completion channel on " + info.name, errno);
  // Non-blocking: the poller waits in poll() (with its wake-up eventfd), never in the channel
  // or in ibv_get_async_event.
  fcntl(d->channel_->fd, F_SETFL, fcntl(d->channel_->fd, F_GETFL) | O_NONBLOCK);
  fcntl(d->ctx_->async_fd, F_SETFL, fcntl(d->ctx_->async_fd, F_GETFL) | O_NONBLOCK);
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

port_address device::address() const {
  std::lock_guard guard{address_mutex_};
  return address_;
}

qp_endpoint device::endpoint(uint32_t qp_num, uint32_t psn) const {
  const auto now = address();
  qp_endpoint e{};
  set_name(e.device, info_.name);
  std::memcpy(e.gid, now.gid.raw, sizeof(e.gid));
  e.qp_num = qp_num;
  e.psn = psn;
  e.lid = now.lid;
  e.port = port_.num;
  e.link_layer = port_.link_layer;
  e.mtu = static_cast<uint8_t>(port_.mtu);
  e.rd_atomic_init = rd_atomic_init();
  e.rd_atomic_dest = rd_atomic_dest();
  return e;
}

rdma_port_info device::advertised() const {
  const auto now = address();
  rdma_port_info p;
  p.device = info_.name;
  p.port = port_.num;
  p.link_layer = port_.link_layer;
  p.lid = now.lid;
  std::copy(std::begin(now.gid.raw), std::end(now.gid.raw), p.gid.begin());
  return p;
}

// [rare] The subnet manager gave the port another LID, the interface another IP address (a
// RoCE GID), or the port came back. The port is described again as at open: with an automatic
// GID index the best RoCE GID is chosen again (a new address may sit in another slot of the
// table). New queue pairs on both sides use the new address (connects carry endpoint(), and
// this engine advertises advertised()); queue pairs set up with the old one fail with their
// next work and are replaced. Peers that learned this process's ports before keep the old GID
// for their reachability check until they learn them again. A port without a usable address
// (no LID yet, no RoCE GID) takes no new work until an event brings one.
void device::refresh_address() {
  auto now = describe_port_again(ctx_, info_.name, port_.num, link_.gid_index);
  if (!now) {
    port_up_ = false;
    return;
  }
  {
    std::lock_guard guard{address_mutex_};
    address_ = {now->lid, now->gid_index, now->gid};
  }
  port_up_ = true;
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

bool device::adopt(const std::shared_ptr<queue_pair>& qp) {
  std::lock_guard guard{qps_mutex_};
  // fail() sets the flag before its handler takes this lock to abandon every queue pair: one
  // adopted after that snapshot would never be polled nor swept, so none is.
  if (failed_.load())
    return false;
  qps_[qp->number()] = qp;
  return true;
}

std::shared_ptr<queue_pair> device::find(uint32_t qp_num) const {
  std::lock_guard guard{qps_mutex_};
  auto i = qps_.find(qp_num);
  return i == qps_.end() ? nullptr : i->second;
}

std::shared_ptr<queue_pair> device::retire(const std::shared_ptr<queue_pair>& qp) {
  std::lock_guard guard{qps_mutex_};
  auto i = qps_.find(qp->number());
  if (i == qps_.end() || i->second != qp)
    return nullptr;
  auto gone = std::move(i->second);
  qps_.erase(i);
  return gone;
}

std::vector<std::shared_ptr<queue_pair>> device::queue_pairs() const {
  std::lock_guard guard{qps_mutex_};
  std::vector<std::shared_ptr<queue_pair>> out;
  for (const auto& kv : qps_)
    out.push_back(kv.second);
  return out;
}

void device::start(device_events& events) {
  events_ = &events;
  poller_ = named_thread("rdma-poll", [this] { poll_loop(); });
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

void device::fail(const caf::error& why) {
  if (!failed_.exchange(true))
    events_->on_device_failed(*this, why);
}

void device::poll_loop() {
  std::array<ibv_wc, poll_batch> wcs;
  int idle = 0;
  auto next_tick = clock_type::now() + tick_interval;
  auto cq_failed = [&] {
    // The queue itself broke (an overrun cannot happen: see reserve): nothing more will come.
    fail(make_error(errc::io_error, "the completion queue of " + name() + " failed"));
  };
  while (!stopping_.load(std::memory_order_relaxed) && !failed_.load()) {
    // Ticks come while completions stream too: a busy device is swept as often as an idle one.
    if (const auto now = clock_type::now(); now >= next_tick) {
      next_tick = now + tick_interval;
      read_async_events();
      if (failed_.load())
        return;
      events_->on_tick(*this, now);
    }
    const int n = ibv_poll_cq(cq_, poll_batch, wcs.data());
    if (n < 0)
      return cq_failed();
    if (n > 0) {
      idle = 0;
      events_->on_completions(*this, {wcs.data(), static_cast<size_t>(n)});
      continue;
    }
    if (++idle < spins_before_sleep)
      continue;
    idle = 0;
    // Arm, then look once more: a completion that came before arming raises no event.
    ibv_req_notify_cq(cq_, 0);
    const int late = ibv_poll_cq(cq_, poll_batch, wcs.data());
    if (late < 0)
      return cq_failed();
    if (late > 0) {
      events_->on_completions(*this, {wcs.data(), static_cast<size_t>(late)});
      continue;
    }
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(next_tick - clock_type::now()).count();
    if (!wait_for_event(static_cast<int>(std::max<int64_t>(left, 0))))
      return;
  }
}

// Sleeps until the completion channel, the device's async events or the wake-up eventfd fire,
// or `timeout_ms` passes; false to stop.
bool device::wait_for_event(int timeout_ms) {
  pollfd fds[3] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {ctx_->async_fd, POLLIN, 0}};
  while (poll(fds, 3, timeout_ms) < 0)
    if (errno != EINTR)
      return false;
  if ((fds[0].revents & POLLIN) != 0) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &context) == 0)
      ibv_ack_cq_events(cq, 1); // every event must be acknowledged before the CQ is destroyed
  }
  if ((fds[2].revents & POLLIN) != 0)
    read_async_events();
  return !stopping_.load() && !failed_.load();
}

async_action classify_async_event(ibv_event_type type) {
  switch (type) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_PATH_MIG_ERR:
    return async_action::qp_failed;
  case IBV_EVENT_CQ_ERR:
  case IBV_EVENT_DEVICE_FATAL:
    return async_action::device_failed;
  case IBV_EVENT_PORT_ERR:
    return async_action::port_down;
  case IBV_EVENT_PORT_ACTIVE:
    return async_action::port_up;
  case IBV_EVENT_LID_CHANGE:
  case IBV_EVENT_GID_CHANGE:
    return async_action::address_changed;
  default:
    // COMM_EST, SQ_DRAINED, PATH_MIG: nothing to do. PKEY and SM changes: queue pairs that no
    // longer reach their peer fail with their next work, and are replaced. SRQ and WQ events
    // concern objects this path does not create.
    return async_action::ignore;
  }
}

// Reads (without blocking) and acknowledges the device's asynchronous events. Each is
// acknowledged before it is acted on: ibv_destroy_qp waits for the events of its queue pair to
// be acknowledged, and acting may destroy one.
void device::read_async_events() {
  for (int i = 0; i < async_events_per_tick; ++i) {
    ibv_async_event e{};
    if (ibv_get_async_event(ctx_, &e) != 0)
      return; // EAGAIN: none waiting
    const ibv_event_type type = e.event_type;
    const async_action action = classify_async_event(type);
    uint32_t qp_num = 0;
    int port = 0;
    if (action == async_action::qp_failed && e.element.qp != nullptr)
      qp_num = e.element.qp->qp_num; // read before the ack: the queue pair may go after it
    if (action == async_action::port_down || action == async_action::port_up ||
        action == async_action::address_changed)
      port = e.element.port_num;
    ibv_ack_async_event(&e);
    const std::string what = name() + ": " + ibv_event_type_str(type);
    switch (action) {
    case async_action::qp_failed:
      if (qp_num != 0)
        events_->on_qp_failed(*this, qp_num, make_error(errc::io_error, what));
      break;
    case async_action::device_failed:
      fail(make_error(errc::io_error, what));
      return;
    case async_action::port_down:
      if (port == port_.num)
        port_up_ = false; // new work avoids the device; queue pairs on it fail on their own
      break;
    case async_action::port_up:
    case async_action::address_changed:
      if (port == port_.num)
        refresh_address(); // usable again only with an address
      break;
    case async_action::ignore:
      break;
    }
  }
}

// Fork safety is opt-in. Without ibv_fork_init, a child forked while the NIC writes into a
// registered page may, on kernels older than 5.13 (which do not copy pinned pages at fork),
// leave the parent's mapping pointing at a page the NIC no longer writes: the parent loses
// the write. ibv_fork_init prevents that by keeping registered pages out of children (madvise
// DONTFORK), which costs every registration and makes those pages vanish in the child: a
// forked child that touches a buffer the parent registered (as the tests' child processes
// do) dies of SIGSEGV. And it must come before any other verbs call in the process, which a
// library cannot promise. So it is called only where the options ask (rdma_fork_safe) and
// before anything else here opens a device; rdma-core also honours RDMAV_FORK_SAFE=1 in the
// environment. Kernels that copy pinned pages need none of it.
caf::error init_fork_safety() {
  const auto status = ibv_is_fork_initialized();
  if (status == IBV_FORK_ENABLED || status == IBV_FORK_UNNEEDED)
    return caf::none;
  if (int rc = ibv_fork_init(); rc != 0)
    return make_error(errc::unavailable,
                      std::string{"ibv_fork_init failed ("} + std::strerror(rc) +
                          "): fork safety must be set up before this process uses verbs at all; "
                          "set RDMAV_FORK_SAFE=1 in the environment instead");
  return caf::none;
}

caf::expected<std::vector<std::unique_ptr<device>>> open_devices(const device_options& options) {
  if (options.fork_safe)
    if (auto err = init_fork_safety())
      return err;
  const auto& names = options.names;
  const auto& link = options.link;
  std::vector<std::string> skipped;
  auto found = rdma_devices(&skipped);
  if (!found)
    return std::move(found.error());
  for (const auto& name : names) {
    if (std::any_of(found->begin(), found->end(), [&](const auto& d) { return d.name == name; }))
      continue;
    std::string why = "RDMA device " + name + " named in the options does not exist";
    for (const auto& s : skipped)
      if (s.starts_with(name + ": "))
        why = "RDMA device " + name + " named in the options cannot be used: " + s;
    return make_error(errc::invalid_argument, why);
  }
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
