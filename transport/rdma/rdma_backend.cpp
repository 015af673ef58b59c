// The RDMA path: one-sided READ and WRITE over reliable-connected queue pairs.
//
// - Devices (rdma_device.hpp): every usable device rdma-core finds (or those the options
//   name), each with a protection domain, an active port, one completion queue and a thread
//   polling it.
// - Memory (rdma_memory.hpp): every region of the engine is registered with every device that
//   takes it; the local buffer of a slice must lie in one (found through the region table,
//   which keeps it pinned while the NIC uses it). A region no device took stays registered
//   with the engine: its slices take the other paths.
// - Peers (rdma_peer.hpp): regions are described by their owner over the TCP data-plane
//   server, queue pairs connected through it; slices go one work request each on the queue
//   pairs of the best device pair for their memory.
// - Completions: the poller of each device maps a completion to its slice and ends it as its
//   queue pair judges (rdma_policy.hpp): a failed one as io_error (retried on another queue
//   pair), or unavailable if its queue pair never worked (the next path), a flushed one of an
//   expired batch as timed out. The same thread handles the device's asynchronous events and
//   sweeps its queue pairs for work the NIC never completes.
// - Serving: the TCP server asks this backend for a region's remote keys, for queue pairs
//   peers connect to and for their release (rdma_responder.hpp, rdma_accepted.hpp).
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"
#include "transport/rdma/rdma_accepted.hpp"
#include "transport/rdma/rdma_peer.hpp"
#include "transport/rdma/rdma_responder.hpp"
#include "transport/rdma/rdma_topology.hpp"

#include <algorithm>

namespace crescent::transport {

namespace {

using rdma::device;
using rdma::endings;
using rdma::work;

// How long stop() waits for the flushes of work in flight before it destroys queue pairs
// regardless (which also stops the NIC touching their buffers).
constexpr auto drain_timeout = std::chrono::seconds(2);

class rdma_backend final : public backend, public rdma::responder, public rdma::device_events {
 public:
  rdma_backend(transfer_engine::impl& engine, std::vector<std::unique_ptr<device>> devices)
      : engine_(engine),
        devices_(std::move(devices)), sweep_limits_{engine.options.rdma_flush_timeout,
                                                    engine.options.rdma_expired_grace} {
    for (const auto& d : devices_)
      views_.push_back({d->name(), d->numa_node()});
    for (auto& d : devices_)
      d->start(*this);
  }

  ~rdma_backend() override { stop(); }

  const char* name() const override { return "rdma"; }

  // Transactional: the new peer is built completely (ports matched, worker started) before
  // anything changes; then, under the lock, it takes every node of `info` at once. If it cannot
  // be built, the peers that served those nodes are removed rather than kept: they were built
  // from the info this one replaces (another process, port or device, perhaps), and the
  // engine's new route for those nodes leaves RDMA out, so nothing would reach them but they
  // would keep their thread, control connection and queue pairs. (Should the engine keep its
  // old route because no path at all reaches the new info, that route's RDMA slices find no
  // peer, are unavailable and take the next path.) A peer still serving other nodes stays.
  caf::error add_peer(const peer_info& info) override {
    if (stopping_.load())
      return make_error(errc::unavailable, "the transfer engine is stopping");
    if (same_peer(info))
      return caf::none; // the same process again: its queue pairs are kept
    auto p = rdma::peer::create(info, {engine_, devices_});
    std::vector<std::shared_ptr<rdma::peer>> replaced;
    {
      std::unique_lock guard{mutex_};
      for (auto n : info.nodes) {
        if (auto i = peers_.find(n); i != peers_.end()) {
          replaced.push_back(i->second);
          peers_.erase(i);
        }
        if (p)
          peers_[n] = *p;
      }
      // A replaced peer that still serves another node stays; the others are no one's route.
      std::erase_if(replaced, [&](const auto& old) {
        return std::any_of(peers_.begin(), peers_.end(),
                           [&](const auto& kv) { return kv.second == old; });
      });
    }
    for (auto& old : replaced)
      old->stop(); // its work in flight flushes, and is retried on the new peer or path
    if (!p)
      return std::move(p.error());
    return caf::none;
  }

  void remove_peer(uint32_t node) override {
    std::shared_ptr<rdma::peer> p;
    {
      std::unique_lock guard{mutex_};
      auto i = peers_.find(node);
      if (i == peers_.end())
        return;
      p = i->second;
      std::erase_if(peers_, [&](const auto& kv) { return kv.second == p; });
    }
    p->stop();
  }

  // The NIC moves registered memory only (registered with a device here), and no code at the
  // owner could check a checksum.
  bool can_carry(const transfer_op& op) const override {
    if (op.checksum)
      return false;
    auto region = engine_.table->pin_address(op.local.data(), op.local.size());
    if (!region)
      return false;
    const bool usable = [&] {
      auto reg = registry_.find(region->region_id);
      return reg && reg->usable();
    }(); // the registration is let go before the pin (end_work says why)
    engine_.table->unpin(*region);
    return usable;
  }

  void start(slice_record& s) override {
    auto refuse = [&](const std::string& why) {
      complete_slice(s, make_error(errc::unavailable, why));
    };
    if (stopping_.load())
      return refuse("the transfer engine is stopping");
    if (s.checksum)
      return refuse("RDMA cannot verify a checksum: no code runs at the owner");
    // Injected faults: a failed or held slice ends or waits here; a corrupted READ changes once
    // landed (end_work); a corrupted WRITE gathers a changed copy of its window in place of the
    // source's (queue_pair::gather_locked), as neither end's memory may be changed for it.
    if (injected_failure(s))
      return;
    auto p = find(s.remote.node);
    if (!p)
      return refuse("no RDMA route to node " + std::to_string(s.remote.node));
    auto local = engine_.table->pin_address(s.local, s.length);
    if (!local)
      return refuse("the local buffer of an RDMA operation must lie in a registered region");
    auto reg = registry_.find(local->region_id);
    if (!reg || !reg->usable()) {
      const std::string why =
          reg ? "no RDMA device here took the local buffer's region: " + reg->refusals
              : std::string{"the local buffer's region is not registered with the RDMA devices"};
      reg.reset(); // the registration goes before the pin (end_work says why)
      engine_.table->unpin(*local);
      return refuse(why);
    }
    work w;
    w.slice = &s;
    w.local_region = *local;
    w.local = std::move(reg);
    if (s.kind == op_kind::write && s.fault == slice_fault::corrupt) { // injected
      auto bytes = corrupted_window(s.local, s.length, s.local_location);
      if (!bytes)
        return rdma::end_work(*engine_.table, w, std::move(bytes.error()));
      w.changed = std::make_unique<rdma::changed_window>();
      w.changed->bytes = *bytes;
    }
    p->submit(std::move(w));
  }

  void expire(batch_state& b) override {
    for (auto& p : all_peers())
      p->expire(b);
  }

  // Never fails the region: a device that refuses the memory is left out for it (see
  // rdma_memory.hpp), and a region no device took is carried by the other paths.
  caf::error on_register(const region_handle& region, std::byte* base) override {
    const auto& o = engine_.options;
    registry_.add(region, base, devices_, [&](int numa_node) {
      return rdma::order_devices(views_, numa_node, o.rdma_preferred_devices,
                                 o.rdma_fallback_devices);
    });
    return caf::none;
  }

  void on_unregister(const region_handle& region) override { registry_.remove(region.region_id); }

  void advertise(peer_info& info) const override {
    for (const auto& d : devices_)
      if (d->usable())
        info.rdma_ports.push_back(d->advertised());
  }

  void stop() override;

  // -- what the TCP server asks ------------------------------------------------------------

  std::vector<rdma::region_key> keys_of(uint64_t region_id) override {
    return registry_.keys_of(region_id, devices_);
  }

  caf::expected<rdma::qp_endpoint> accept(const rdma::connect_request& req,
                                          const void* owner) override {
    if (stopping_.load())
      return make_error(errc::unavailable, "the transfer engine is stopping");
    const std::string wanted = rdma::name_of(req.target_device);
    auto* d = device_named(wanted);
    if (d == nullptr)
      return make_error(errc::not_found, "no RDMA device " + wanted + " here");
    if (!d->usable())
      return make_error(errc::unavailable, "RDMA device " + wanted +
                                               (d->failed() ? " has failed" : "'s port is down"));
    return accepted_.accept(*d, req.initiator, owner);
  }

  caf::error release_one(const void* owner, const rdma::release_request& req) override {
    const std::string name = rdma::name_of(req.device);
    auto* d = device_named(name);
    if (d == nullptr)
      return make_error(errc::not_found, "no RDMA device " + name + " here");
    return accepted_.release_one(owner, *d, req.qp_num);
  }

  void release(const void* owner) override { accepted_.release(owner); }

  // -- what the devices' pollers report -------------------------------------------------------

  void on_completions(device& d, std::span<const ibv_wc> wcs) override;
  void on_device_failed(device& d, const caf::error& why) override;
  void on_qp_failed(device& d, uint32_t qp_num, const caf::error& why) override;
  void on_tick(device& d, clock_type::time_point now) override;

 private:
  void abandon_all(device& d, const caf::error& reason);
  bool wait_drained() const;
  bool same_peer(const peer_info& info) const;

  device* device_named(const std::string& name) const {
    for (const auto& d : devices_)
      if (d->name() == name)
        return d.get();
    return nullptr;
  }

  std::shared_ptr<rdma::peer> find(uint32_t node) const {
    std::shared_lock guard{mutex_};
    auto i = peers_.find(node);
    return i == peers_.end() ? nullptr : i->second;
  }

  std::vector<std::shared_ptr<rdma::peer>> all_peers() const {
    std::shared_lock guard{mutex_};
    std::vector<std::shared_ptr<rdma::peer>> out;
    for (const auto& kv : peers_)
      if (std::find(out.begin(), out.end(), kv.second) == out.end())
        out.push_back(kv.second);
    return out;
  }

  // Declared so that destruction goes peers, accepted queue pairs, registrations, devices:
  // everything that uses a device's protection domain goes before it.
  transfer_engine::impl& engine_;
  std::vector<std::unique_ptr<device>> devices_;
  std::vector<rdma::device_view> views_;
  rdma::memory_registry registry_;
  rdma::accepted_qps accepted_;
  const rdma::sweep_limits sweep_limits_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<rdma::peer>> peers_;
  std::atomic<bool> stopping_{false};
};

// Whether `info` is the peer that already serves all of its nodes, unchanged: re-adding it
// (a periodic refresh, say) must not tear down its queue pairs.
bool rdma_backend::same_peer(const peer_info& info) const {
  std::shared_lock guard{mutex_};
  std::shared_ptr<rdma::peer> p;
  for (auto n : info.nodes) {
    auto i = peers_.find(n);
    if (i == peers_.end() || (p && i->second != p))
      return false;
    p = i->second;
  }
  if (!p)
    return false;
  const auto& old = p->info();
  return old.nodes == info.nodes && old.host_id == info.host_id && old.pid == info.pid &&
         old.tcp_host == info.tcp_host && old.tcp_port == info.tcp_port &&
         old.rdma_ports == info.rdma_ports;
}

void rdma_backend::on_completions(device& d, std::span<const ibv_wc> wcs) {
  endings out;
  for (const auto& wc : wcs) {
    auto qp = d.find(wc.qp_num);
    if (!qp)
      continue; // abandoned before this completion was polled: its work has ended already
    auto done = qp->complete(wc, out);
    if (done.w.slice != nullptr) {
      if (done.invalidate)
        if (auto p = find(done.w.slice->remote.node))
          p->invalidate(done.w.slice->remote.region_id); // stale keys: ask the owner again
      rdma::end_work(*engine_.table, done.w, std::move(done.err));
    }
    rdma::end_all(*engine_.table, out);
    if (done.retire)
      d.retire(qp);
  }
}

void rdma_backend::on_device_failed(device& d, const caf::error& why) {
  abandon_all(d, make_error(errc::io_error, describe(why)));
}

void rdma_backend::on_qp_failed(device& d, uint32_t qp_num, const caf::error& why) {
  if (auto qp = d.find(qp_num)) {
    // Ours: the NIC moved it to ERR, so what it has in flight flushes; what waits goes
    // elsewhere now, and it is replaced when next picked.
    endings out;
    if (qp->fail(why, out))
      d.retire(qp);
    rdma::end_all(*engine_.table, out);
    return;
  }
  accepted_.drop_failed(d, qp_num); // a peer's: its end fails with its next work
}

void rdma_backend::on_tick(device& d, clock_type::time_point now) {
  endings out;
  for (auto& qp : d.queue_pairs())
    if (qp->sweep(now, sweep_limits_, out))
      d.retire(qp);
  rdma::end_all(*engine_.table, out);
}

void rdma_backend::abandon_all(device& d, const caf::error& reason) {
  endings out;
  for (auto& qp : d.queue_pairs()) {
    qp->abandon(reason, out);
    d.retire(qp);
  }
  rdma::end_all(*engine_.table, out);
}

bool rdma_backend::wait_drained() const {
  const auto until = clock_type::now() + drain_timeout;
  for (;;) {
    const bool drained = std::all_of(devices_.begin(), devices_.end(), [](const auto& d) {
      return d->failed() || d->queue_pairs().empty();
    });
    if (drained)
      return true;
    if (clock_type::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void rdma_backend::stop() {
  if (stopping_.exchange(true))
    return;
  std::vector<std::shared_ptr<rdma::peer>> peers = all_peers();
  {
    std::unique_lock guard{mutex_};
    peers_.clear();
  }
  for (auto& p : peers)
    p->stop(); // breaks every queue pair: what is in flight flushes
  wait_drained();
  for (auto& d : devices_)
    d->stop();
  // Whatever did not drain: destroying the queue pair stops the NIC, then its work ends.
  for (auto& d : devices_)
    abandon_all(*d, make_error(errc::unavailable, "the transfer engine is stopping"));
  peers.clear();
  accepted_.clear();
  registry_.clear();
}

} // namespace

caf::expected<std::unique_ptr<backend>> make_rdma_backend(transfer_engine::impl& engine) {
  const auto& o = engine.options;
  rdma::device_options options;
  options.names = o.rdma_preferred_devices;
  options.names.insert(options.names.end(), o.rdma_fallback_devices.begin(),
                       o.rdma_fallback_devices.end());
  options.link.gid_index = o.rdma_gid_index;
  options.link.traffic_class = o.rdma_traffic_class;
  options.link.service_level = o.rdma_service_level;
  options.link.qp_timeout = o.rdma_qp_timeout;
  options.link.retry_count = o.rdma_retry_count;
  options.link.rnr_retry = o.rdma_rnr_retry;
  options.fork_safe = o.rdma_fork_safe;
  auto devices = rdma::open_devices(options);
  if (!devices)
    return std::move(devices.error());
  auto b = std::make_unique<rdma_backend>(engine, std::move(*devices));
  engine.rdma_responder = b.get();
  return std::unique_ptr<backend>{std::move(b)};
}

} // namespace crescent::transport
