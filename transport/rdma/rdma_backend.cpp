// The RDMA path: one-sided READ and WRITE over reliable-connected queue pairs.
//
// - Devices (rdma_device.hpp): every usable device rdma-core finds (or those the options
//   name), each with a protection domain, an active port, one completion queue and a thread
//   polling it.
// - Memory (rdma_memory.hpp): every region of the engine is registered with every device; the
//   local buffer of a slice must lie in one (found through the region table, which keeps it
//   pinned while the NIC uses it).
// - Peers (rdma_peer.hpp): regions are described by their owner over the TCP data-plane
//   server, queue pairs connected through it; slices go one work request each on the queue
//   pairs of the best device pair for their memory.
// - Completions: the poller of each device maps a completion to its slice and ends it;
//   a failed one ends as io_error (retried on another queue pair, then path), a flushed one of
//   an expired batch as timed out.
// - Serving: the TCP server asks this backend for a region's remote keys and for queue pairs
//   peers connect to (rdma_responder.hpp, rdma_accepted.hpp).
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"
#include "transport/rdma/rdma_accepted.hpp"
#include "transport/rdma/rdma_peer.hpp"
#include "transport/rdma/rdma_responder.hpp"
#include "transport/rdma/rdma_topology.hpp"

#include <algorithm>
#include <cstdio>

namespace crescent::transport {

namespace {

using rdma::device;
using rdma::endings;
using rdma::work;

// How long stop() waits for the flushes of work in flight before it destroys queue pairs
// regardless (which also stops the NIC touching their buffers).
constexpr auto drain_timeout = std::chrono::seconds(2);

bool remote_access_error(ibv_wc_status status) {
  return status == IBV_WC_REM_ACCESS_ERR || status == IBV_WC_REM_INV_REQ_ERR ||
         status == IBV_WC_REM_OP_ERR;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%x", v);
  return buf;
}

class rdma_backend final : public backend, public rdma::responder {
 public:
  rdma_backend(transfer_engine::impl& engine, std::vector<std::unique_ptr<device>> devices)
      : engine_(engine), devices_(std::move(devices)) {
    for (const auto& d : devices_)
      views_.push_back({d->name(), d->numa_node()});
    for (auto& d : devices_)
      d->start([this](device& dev, std::span<const ibv_wc> wcs, bool failed) {
        on_completions(dev, wcs, failed);
      });
  }

  ~rdma_backend() override { stop(); }

  const char* name() const override { return "rdma"; }

  caf::error add_peer(const peer_info& info) override {
    if (stopping_.load())
      return make_error(errc::unavailable, "the transfer engine is stopping");
    auto p = rdma::peer::create(info, {engine_, devices_});
    if (!p)
      return std::move(p.error());
    std::vector<std::shared_ptr<rdma::peer>> replaced;
    {
      std::unique_lock guard{mutex_};
      for (auto n : info.nodes) {
        if (auto i = peers_.find(n); i != peers_.end())
          replaced.push_back(i->second);
        peers_[n] = *p;
      }
      // A replaced peer whose nodes all moved is no one's route any more.
      std::erase_if(replaced, [&](const auto& old) {
        return std::any_of(peers_.begin(), peers_.end(),
                           [&](const auto& kv) { return kv.second == old; });
      });
    }
    for (auto& old : replaced)
      old->stop();
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

  // The NIC moves registered memory only, and no code at the owner could check a checksum.
  bool can_carry(const transfer_op& op) const override {
    if (op.checksum)
      return false;
    auto region = engine_.table->pin_address(op.local.data(), op.local.size());
    if (!region)
      return false;
    engine_.table->unpin(*region);
    return true;
  }

  void start(slice_record& s) override {
    auto refuse = [&](const std::string& why) {
      complete_slice(s, make_error(errc::unavailable, why));
    };
    if (stopping_.load())
      return refuse("the transfer engine is stopping");
    if (s.checksum)
      return refuse("RDMA cannot verify a checksum: no code runs at the owner");
    auto p = find(s.remote.node);
    if (!p)
      return refuse("no RDMA route to node " + std::to_string(s.remote.node));
    auto local = engine_.table->pin_address(s.local, s.length);
    if (!local)
      return refuse("the local buffer of an RDMA operation must lie in a registered region");
    auto reg = registry_.find(local->region_id);
    if (!reg) {
      engine_.table->unpin(*local);
      return refuse("the local buffer's region is not registered with the RDMA devices yet");
    }
    p->submit(work{&s, *local, std::move(reg)});
  }

  void expire(batch_state& b) override {
    for (auto& p : all_peers())
      p->expire(b);
  }

  caf::error on_register(const region_handle& region, std::byte* base) override {
    const auto& o = engine_.options;
    return registry_.add(region, base, devices_, [&](int numa_node) {
      return rdma::order_devices(views_, numa_node, o.rdma_preferred_devices,
                                 o.rdma_fallback_devices);
    });
  }

  void on_unregister(const region_handle& region) override { registry_.remove(region.region_id); }

  void advertise(peer_info& info) const override {
    for (const auto& d : devices_)
      if (!d->failed())
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
    auto d = std::find_if(devices_.begin(), devices_.end(),
                          [&](const auto& dev) { return dev->name() == wanted; });
    if (d == devices_.end())
      return make_error(errc::not_found, "no RDMA device " + wanted + " here");
    if ((*d)->failed())
      return make_error(errc::unavailable, "RDMA device " + wanted + " has failed");
    return accepted_.accept(**d, req.initiator, owner);
  }

  void release(const void* owner) override { accepted_.release(owner); }

 private:
  void on_completions(device& d, std::span<const ibv_wc> wcs, bool failed);
  void abandon_all(device& d, const caf::error& reason);
  caf::error verdict(const ibv_wc& wc, const work& w, const device& d) const;
  bool wait_drained() const;

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
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<rdma::peer>> peers_;
  std::atomic<bool> stopping_{false};
};

caf::error rdma_backend::verdict(const ibv_wc& wc, const work& w, const device& d) const {
  if (wc.status == IBV_WC_SUCCESS)
    return caf::none;
  const auto& s = *w.slice;
  if (s.batch->expired.load())
    return make_error(errc::timeout, "the batch's deadline passed");
  if (s.batch->cancelled.load())
    return make_error(errc::cancelled, "cancelled while in flight");
  return make_error(errc::io_error, std::string{"RDMA "} +
                                        (s.kind == op_kind::read ? "READ" : "WRITE") + " of " +
                                        std::to_string(s.length) + " bytes with node " +
                                        std::to_string(s.remote.node) + " through " + d.name() +
                                        " failed: " + ibv_wc_status_str(wc.status) +
                                        " (vendor error " + hex(wc.vendor_err) + ")");
}

void rdma_backend::on_completions(device& d, std::span<const ibv_wc> wcs, bool failed) {
  if (failed)
    return abandon_all(
        d, make_error(errc::io_error, "the completion queue of " + d.name() + " failed"));
  for (const auto& wc : wcs) {
    auto qp = d.find(wc.qp_num);
    if (!qp)
      continue; // abandoned before this completion was polled: its work has ended already
    endings out;
    auto done = qp->complete(wc, out);
    if (done.w.slice == nullptr)
      continue; // not a request in flight: a provider bug, asserted in debug builds
    if (remote_access_error(wc.status))
      if (auto p = find(done.w.slice->remote.node))
        p->invalidate(done.w.slice->remote.region_id); // stale keys: ask the owner again
    auto err = verdict(wc, done.w, d);
    rdma::end_work(*engine_.table, done.w, std::move(err));
    rdma::end_all(*engine_.table, out);
    if (done.retire)
      d.retire(wc.qp_num);
  }
}

void rdma_backend::abandon_all(device& d, const caf::error& reason) {
  endings out;
  for (auto& qp : d.queue_pairs()) {
    qp->abandon(reason, out);
    d.retire(qp->number());
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
  std::vector<std::string> names = o.rdma_preferred_devices;
  names.insert(names.end(), o.rdma_fallback_devices.begin(), o.rdma_fallback_devices.end());
  auto devices =
      rdma::open_devices(names, {o.rdma_gid_index, o.rdma_traffic_class, o.rdma_service_level});
  if (!devices)
    return std::move(devices.error());
  auto b = std::make_unique<rdma_backend>(engine, std::move(*devices));
  engine.rdma_responder = b.get();
  return std::unique_ptr<backend>{std::move(b)};
}

} // namespace crescent::transport
