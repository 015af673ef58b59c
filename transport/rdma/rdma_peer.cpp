#include "transport/rdma/rdma_peer.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_qp_setup.hpp"
#include "transport/rdma/rdma_topology.hpp"
#include "transport/thread_name.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>

namespace crescent::transport::rdma {

// -- creation and teardown -------------------------------------------------------------------

// The control channel's replies wait for the owner to create a queue pair: a connect timeout
// tuned for a LAN (tens of ms) would fail them, so they get at least a second.
peer::peer(const peer_info& info, path_context ctx)
    : info_(info), node_(info.nodes.empty() ? 0 : info.nodes.front()), ctx_(ctx),
      control_(info.tcp_host, info.tcp_port, node_,
               std::max(ctx.engine.options.connect_timeout, control_reply_min)) {}

caf::expected<std::shared_ptr<peer>> peer::create(const peer_info& info, path_context ctx) {
  if (info.rdma_ports.empty())
    return make_error(errc::unavailable, "the peer has no RDMA device");
  if (info.tcp_port == 0 || info.tcp_host.empty())
    return make_error(errc::unavailable,
                      "the peer runs no TCP data-plane server to set up RDMA through");
  std::shared_ptr<peer> p{new peer(info, ctx)};
  const size_t ports = info.rdma_ports.size();
  p->pool_at_.assign(ctx.devices.size() * ports, -1);
  for (size_t d = 0; d < ctx.devices.size(); ++d) {
    const auto& mine = ctx.devices[d]->port();
    for (size_t r = 0; r < ports; ++r) {
      const auto& theirs = info.rdma_ports[r];
      if (!ports_reachable(mine.link_layer, mine.gid.raw, theirs.link_layer, theirs.gid))
        continue;
      p->pool_at_[d * ports + r] = static_cast<long>(p->pools_.size());
      pool& added = p->pools_.emplace_back();
      added.device = d;
      added.port = r;
      added.qps.resize(ctx.engine.options.rdma_qps_per_peer);
    }
  }
  if (p->pools_.empty())
    return make_error(errc::unavailable, "no RDMA device here reaches one of node " +
                                             std::to_string(p->node_) +
                                             "'s (link layers or InfiniBand subnets differ)");
  p->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (p->wake_fd_ < 0)
    return make_error(errc::unavailable, "eventfd failed");
  p->worker_ = named_thread("rdma-peer", [raw = p.get()] { raw->run(); });
  return p;
}

peer::~peer() {
  stop();
  if (wake_fd_ >= 0)
    close(wake_fd_);
}

void peer::stop() {
  endings out;
  std::vector<std::shared_ptr<queue_pair>> qps;
  {
    std::lock_guard guard{mutex_};
    if (stopping_)
      return;
    stopping_ = true;
    for (auto& [key, list] : waiting_)
      for (auto& w : list)
        out.emplace_back(std::move(w), error_here(errc::unavailable, "the RDMA path is closing"));
    waiting_.clear();
    jobs_.clear();
    qps = all_qps_locked();
  }
  wake();
  control_.interrupt();
  if (worker_.joinable())
    worker_.join();
  // Flushed work is retried elsewhere (io_error); a removed peer has no RDMA route any more.
  const auto reason = error_here(errc::io_error, "the RDMA path is closing");
  for (auto& qp : qps)
    if (qp->break_with(reason, out))
      retire(qp);
  end_all(*ctx_.engine.table, out);
  control_.close();
}

caf::error peer::error_here(errc code, const std::string& what) const {
  return make_error(code, what + " (node " + std::to_string(node_) + ")");
}

void peer::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
}

void peer::retire(const std::shared_ptr<queue_pair>& qp) {
  // The device's reference goes; the last holder destroys the verbs queue pair.
  [[maybe_unused]] auto gone = qp->dev().retire(qp);
}

std::vector<std::shared_ptr<queue_pair>> peer::all_qps_locked() const {
  std::vector<std::shared_ptr<queue_pair>> out;
  for (const auto& p : pools_)
    for (const auto& qp : p.qps)
      if (qp)
        out.push_back(qp);
  return out;
}

// -- the submitting side -----------------------------------------------------------------------

void peer::submit(work w) {
  std::shared_ptr<const described> d;
  bool closing = false;
  bool late = false;
  {
    std::lock_guard guard{mutex_};
    const auto& h = w.slice->remote;
    auto i = cache_.find(h.region_id);
    if (stopping_) {
      closing = true;
    } else if (w.slice->batch->expired.load()) {
      // Checked under the lock expire() takes after the watchdog sets `expired`: work either
      // meets the flag here or waits where expire() looks.
      late = true;
    } else if (i != cache_.end() && i->second->region.access_key == h.access_key) {
      d = i->second;
    } else {
      // Another key than the one the owner accepted goes to the owner too: it decides.
      auto& list = waiting_[{h.region_id, h.access_key}];
      if (list.empty())
        jobs_.push_back(job{job_kind::describe, h, 0, {}, {}});
      list.push_back(std::move(w));
    }
  }
  if (closing || late) {
    endings out;
    out.emplace_back(std::move(w), late
                                       ? deadline_passed()
                                       : error_here(errc::unavailable, "the RDMA path is closing"));
    end_all(*ctx_.engine.table, out);
  } else if (d) {
    route(std::move(w), *d);
  } else {
    wake();
  }
}

void peer::route(work w, const described& d) {
  const auto& s = *w.slice;
  // What the owner would check, checked here: it described the region, not this handle.
  const region_entry entry{d.region.region_id, d.region.access_key, d.region.length};
  if (auto err = check_access(entry, s.remote, s.remote_offset, s.length)) {
    endings out;
    out.emplace_back(std::move(w), std::move(err));
    return end_all(*ctx_.engine.table, out);
  }
  bool wake_worker = false;
  auto qp = [&]() -> caf::expected<std::shared_ptr<queue_pair>> {
    std::lock_guard guard{mutex_};
    if (stopping_)
      return error_here(errc::unavailable, "the RDMA path is closing");
    return pick_locked(w, d, wake_worker);
  }();
  if (wake_worker)
    wake();
  endings out;
  if (!qp)
    out.emplace_back(std::move(w), std::move(qp.error()));
  else if (!(*qp)->submit(w, out))
    out.emplace_back(std::move(w), error_here(errc::io_error, "a queue pair broke"));
  end_all(*ctx_.engine.table, out);
}

// The queue pair for a slice: the best of our devices for its buffer that reaches one of the
// owner's devices for the region, in the owner's order, skipping device pairs that recently
// failed to connect. Sets the work's keys and address for that pair.
caf::expected<std::shared_ptr<queue_pair>> peer::pick_locked(work& w, const described& d,
                                                             bool& wake_worker) {
  const auto& s = *w.slice;
  const auto now = clock_type::now();
  const size_t ports = info_.rdma_ports.size();
  for (size_t dev : w.local->order) {
    const auto& mine = *ctx_.devices[dev];
    if (!mine.usable() || s.length > mine.port().max_msg_bytes || w.local->mrs[dev] == nullptr)
      continue;
    for (const auto& [port, rkey] : d.keys) {
      const long at = pool_at_[dev * ports + port];
      if (at < 0 || pools_[at].health->down(now))
        continue;
      auto qp = slot_locked(static_cast<size_t>(at), s.remote, wake_worker);
      if (!qp)
        continue; // this pair is down now; another may do
      w.lkey = w.local->mrs[dev]->lkey;
      w.rkey = rkey;
      w.remote_addr = d.region.base_address + s.remote.offset + s.remote_offset;
      return qp;
    }
  }
  return error_here(errc::unavailable,
                    "no RDMA device pair can carry " + to_string(s.remote) + " now");
}

// The pool's next queue pair in turn; a missing or broken one is replaced by a new one, which
// the worker connects (slices queue on it meanwhile) with `proof`, a handle the owner gave us,
// and the owner is told to release its end of the one replaced.
caf::expected<std::shared_ptr<queue_pair>>
peer::slot_locked(size_t pool_index, const region_handle& proof, bool& wake_worker) {
  auto& p = pools_[pool_index];
  auto& slot = p.qps[p.next++ % p.qps.size()];
  if (slot && !slot->broken())
    return slot;
  auto& dev = *ctx_.devices[p.device];
  const uint32_t depth = std::min(ctx_.engine.options.rdma_queue_depth, dev.max_qp_wr());
  auto made = queue_pair::create(dev, depth, node_, p.health);
  if (!made) {
    p.health->failed(clock_type::now());
    return std::move(made.error());
  }
  if (slot)
    if (auto remote = slot->remote())
      jobs_.push_back(job{job_kind::release, {}, 0, {}, std::move(*remote)});
  slot = *made;
  jobs_.push_back(job{job_kind::connect, proof, pool_index, slot, {}});
  wake_worker = true;
  return slot;
}

void peer::invalidate(uint64_t region_id) {
  std::lock_guard guard{mutex_};
  cache_.erase(region_id);
}

void peer::expire(const batch_state& b) {
  endings out;
  std::vector<std::shared_ptr<queue_pair>> qps;
  {
    std::lock_guard guard{mutex_};
    for (auto i = waiting_.begin(); i != waiting_.end();) {
      auto& list = i->second;
      auto ours = std::stable_partition(list.begin(), list.end(),
                                        [&](const work& w) { return w.slice->batch != &b; });
      for (auto j = ours; j != list.end(); ++j)
        out.emplace_back(std::move(*j), deadline_passed());
      list.erase(ours, list.end());
      i = list.empty() ? waiting_.erase(i) : std::next(i);
    }
    qps = all_qps_locked();
  }
  // Only what waits: requests in flight cannot be taken back from the NIC without resetting
  // the queue pair, which other batches' work shares. They end with their completions.
  for (auto& qp : qps)
    qp->expire(b, out);
  end_all(*ctx_.engine.table, out);
}

// -- the worker --------------------------------------------------------------------------------

void peer::run() {
  for (;;) {
    std::optional<job> j;
    {
      std::lock_guard guard{mutex_};
      if (stopping_)
        return;
      if (!jobs_.empty()) {
        j = std::move(jobs_.front());
        jobs_.pop_front();
      }
    }
    if (!j) {
      wait_idle();
      continue;
    }
    const uint64_t generation = control_.generation();
    if (j->kind == job_kind::describe)
      run_describe(*j);
    else if (j->kind == job_kind::connect)
      run_connect(*j);
    else
      run_release(*j);
    if (control_.generation() != generation)
      channel_lost();
  }
}

// Sleeps until there is a job, or the owner closes the control connection (it never sends
// anything unasked, so any event on it means the end of it).
void peer::wait_idle() {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {control_.fd(), POLLIN | POLLRDHUP, 0}};
  const nfds_t n = fds[1].fd >= 0 ? 2 : 1;
  if (poll(fds, n, -1) <= 0)
    return;
  if ((fds[0].revents & POLLIN) != 0) {
    uint64_t count = 0;
    [[maybe_unused]] auto got = ::read(wake_fd_, &count, sizeof(count));
  }
  if (n == 2 && fds[1].revents != 0) {
    control_.close();
    channel_lost();
  }
}

// The owner destroyed its ends of every queue pair connected through the lost connection:
// ours are broken too. Their work in flight flushes and is retried on new ones.
void peer::channel_lost() {
  std::vector<std::shared_ptr<queue_pair>> qps;
  {
    std::lock_guard guard{mutex_};
    qps = all_qps_locked();
  }
  endings out;
  const auto reason = error_here(errc::io_error, "the RDMA control connection was lost");
  for (auto& qp : qps)
    if (qp->break_with(reason, out))
      retire(qp);
  end_all(*ctx_.engine.table, out);
}

std::shared_ptr<const peer::described> peer::translate(const remote_region& r) const {
  auto d = std::make_shared<described>();
  d->region = r;
  for (const auto& k : r.keys) {
    const std::string name = name_of(k.device);
    for (size_t i = 0; i < info_.rdma_ports.size(); ++i)
      if (info_.rdma_ports[i].device == name)
        d->keys.emplace_back(i, k.rkey);
  }
  return d;
}

void peer::run_describe(const job& j) {
  auto reply = control_.describe(j.handle);
  std::shared_ptr<const described> d;
  std::vector<work> go;
  endings out;
  take_described(j, reply, d, go, out);
  end_all(*ctx_.engine.table, out);
  for (auto& w : go)
    route(std::move(w), *d);
}

// Hands the description (or the refusal) to the slices that waited for it.
void peer::take_described(const job& j, const caf::expected<remote_region>& reply,
                          std::shared_ptr<const described>& d, std::vector<work>& go,
                          endings& out) {
  caf::error err;
  if (reply) {
    d = translate(*reply);
    if (d->keys.empty())
      err = error_here(errc::unavailable, to_string(j.handle) + " has no key for an advertised "
                                                                "RDMA device of its owner");
  } else if (is(reply.error(), errc::not_found) || is(reply.error(), errc::access_denied) ||
             is(reply.error(), errc::out_of_range)) {
    err = reply.error(); // a refusal stays a refusal
  } else {
    // The owner could not be asked: the next path may still reach it.
    err = error_here(errc::unavailable,
                     "cannot describe " + to_string(j.handle) + ": " + describe(reply.error()));
  }
  // This runs on the worker, which looks at its jobs again before it sleeps: no wake-up needed.
  std::lock_guard guard{mutex_};
  if (!err) {
    if (cache_.size() >= regions_cached_max)
      cache_.clear();
    cache_[j.handle.region_id] = d;
  }
  auto i = waiting_.find({j.handle.region_id, j.handle.access_key});
  if (i == waiting_.end())
    return; // every waiting slice timed out meanwhile
  auto& list = i->second;
  if (!err) {
    go = std::move(list);
  } else if (is(err, errc::out_of_range)) {
    // Only this handle lies outside the region; others of the same key get their own answer.
    auto rest = std::stable_partition(list.begin(), list.end(),
                                      [&](const work& w) { return w.slice->remote != j.handle; });
    for (auto k = rest; k != list.end(); ++k)
      out.emplace_back(std::move(*k), err);
    list.erase(rest, list.end());
    if (!list.empty()) {
      jobs_.push_back(job{job_kind::describe, list.front().slice->remote, 0, {}, {}});
      return;
    }
  } else {
    for (auto& w : list)
      out.emplace_back(std::move(w), err);
  }
  waiting_.erase(i);
}

void peer::run_connect(const job& j) {
  auto qp = j.qp.lock();
  if (!qp || qp->broken())
    return;
  const auto& theirs = info_.rdma_ports[pools_[j.pool].port];
  connect_request req{};
  set_name(req.target_device, theirs.device);
  req.initiator = qp->local_endpoint();
  auto reply = control_.connect(req, j.handle);
  const uint64_t generation = control_.generation();
  caf::error err;
  if (!reply)
    err = std::move(reply.error());
  else if (name_of(reply->device) != theirs.device)
    err = make_error(errc::io_error, "the owner answered for another device");
  else
    err = check_reachable(qp->dev(), *reply);
  endings out;
  if (!err)
    err = qp->connect(*reply, generation, out);
  if (err) {
    // The owner created its end if it answered: it goes, as ours does.
    if (reply) {
      [[maybe_unused]] auto gone = control_.release(theirs.device, reply->qp_num, generation);
    }
    caf::error reason;
    if (is(err, errc::not_found) || is(err, errc::access_denied) || is(err, errc::out_of_range)) {
      // The owner refused the handle that vouched for us (its region went, say): that says
      // nothing about the path. Its description is forgotten, so its slices ask again and are
      // told; the others are retried with another handle.
      invalidate(j.handle.region_id);
      reason = error_here(errc::io_error, "the owner refused " + to_string(j.handle) +
                                              " for a queue pair: " + describe(err));
    } else {
      // A queue pair that never worked: its device pair is left alone for a while, and its
      // slices move on to the next path at once rather than trying this one again.
      pools_[j.pool].health->failed(clock_type::now());
      reason = error_here(errc::unavailable, "cannot connect " + qp->dev().name() + " to " +
                                                 theirs.device + ": " + describe(err));
    }
    if (qp->break_with(reason, out))
      retire(qp);
  }
  end_all(*ctx_.engine.table, out);
}

// Best effort: an owner that does not answer loses the control connection, and with it every
// queue pair it holds for us (run() notices the new generation).
void peer::run_release(const job& j) {
  [[maybe_unused]] auto err =
      control_.release(j.remote.device, j.remote.qp_num, j.remote.generation);
}

} // namespace crescent::transport::rdma
