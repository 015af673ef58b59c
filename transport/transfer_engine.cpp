// The transfer engine: creation, regions and one-operation conveniences. Options are checked
// in transfer_options.cpp, peers and metrics are in transfer_peers.cpp, batches in
// transfer_batch.cpp, backends in local_backend.cpp, shm/, tcp/, rdma/ and cuda/.
#include "transport/transfer_engine.hpp"

#include "messages/errors.hpp"
#include "transport/cpu_affinity.hpp"
#include "transport/engine_internal.hpp"
#include "transport/thread_name.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <thread>

namespace crescent::transport {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The CPUs this process may run on: pinned to some (taskset, a cpuset, `bench transfer
// --cpus`), it gets the connections those can drive, not what the machine has.
uint32_t usable_cpus() {
  auto cpus = allowed_cpus();
  if (!cpus)
    return std::thread::hardware_concurrency(); // over 1024 CPUs: glibc's set is too small
  return static_cast<uint32_t>(cpus->size());
}

// Processes with the same boot id share a kernel, hence memfds through /proc.
std::string read_host_id() {
  std::ifstream in{"/proc/sys/kernel/random/boot_id"};
  std::string id;
  std::getline(in, id);
  if (id.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    id = name;
  }
  return id;
}

// The RDMA path needs the TCP server (its control channel); without a device it is off, and
// the reason is kept for rdma_status().
caf::error open_rdma(transfer_engine::impl& p) {
  if (!p.options.enable_rdma) {
    p.rdma_status = make_error(errc::unavailable, "RDMA is disabled by the engine's options");
    return caf::none;
  }
  if (!p.options.enable_tcp) {
    p.rdma_status =
        make_error(errc::unavailable, "RDMA needs the TCP data-plane server, which is disabled");
    return caf::none;
  }
  auto rdma = make_rdma_backend(p);
  if (rdma) {
    p.rdma = std::move(*rdma);
    return caf::none;
  }
  if (!is(rdma.error(), errc::unavailable))
    return std::move(rdma.error()); // a device exists but the options do not fit it
  p.rdma_status = std::move(rdma.error());
  return caf::none;
}

caf::expected<std::unique_ptr<transfer_engine::impl>> make_impl(transfer_options options) {
  if (auto err = check_transfer_options(options))
    return err;
  auto p = std::make_unique<transfer_engine::impl>();
  auto table = region_table::create(options.region_capacity);
  if (!table)
    return std::move(table.error());
  p->table = std::move(*table);
  p->host_id = read_host_id();
  p->pid = static_cast<int32_t>(getpid());
  p->key_state = options.key_seed;
  if (p->key_state == 0) {
    std::random_device rd;
    p->key_state = (uint64_t{rd()} << 32) | rd();
  }
  p->local_nodes.insert(options.local_nodes.begin(), options.local_nodes.end());
  if (options.tcp_connections_per_peer == 0)
    options.tcp_connections_per_peer = std::clamp(usable_cpus() / 2, 1u, 4u);
  p->options = std::move(options);
  p->local = make_local_backend(*p);
  if (!p->options.enable_cuda) {
    p->cuda_status = make_error(errc::unavailable, "CUDA is disabled by the engine's options");
  } else if (auto cuda = make_cuda_backend(*p)) {
    p->cuda = std::move(*cuda);
  } else {
    p->cuda_status = std::move(cuda.error());
  }
  if (p->options.enable_shm)
    p->shm = make_shm_backend(*p);
  if (auto err = open_rdma(*p))
    return err;
  if (p->options.enable_tcp) {
    auto tcp = make_tcp_backend(*p);
    if (!tcp)
      return std::move(tcp.error());
    p->tcp = std::move(*tcp);
  }
  p->watchdog = named_thread("xfer-watchdog", [raw = p.get()] { raw->run_watchdog(); });
  return p;
}

} // namespace

uint64_t transfer_engine::impl::next_key() {
  std::lock_guard guard{key_mutex};
  return splitmix64(key_state);
}

bool transfer_engine::impl::is_local(uint32_t node) const {
  return local_nodes.empty() || local_nodes.count(node) != 0;
}

std::vector<backend*> transfer_engine::impl::paths_to(uint32_t node) const {
  if (is_local(node))
    return cuda ? std::vector<backend*>{cuda.get(), local.get()}
                : std::vector<backend*>{local.get()};
  std::shared_lock guard{routes_mutex};
  auto i = routes.find(node);
  if (i == routes.end())
    return {};
  return i->second->paths;
}

path_counters& transfer_engine::impl::counters_for(const char* backend_name, uint32_t node) {
  std::lock_guard guard{metrics_mutex};
  auto& slot = counters[{backend_name, node}];
  if (!slot)
    slot = std::make_unique<path_counters>();
  return *slot;
}

caf::expected<std::shared_ptr<transfer_engine>> transfer_engine::create(transfer_options options) {
  auto p = make_impl(std::move(options));
  if (!p)
    return std::move(p.error());
  return std::shared_ptr<transfer_engine>{new transfer_engine(std::move(*p))};
}

transfer_engine::transfer_engine(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

caf::expected<std::shared_ptr<transfer_engine>> transfer_engine::create_local(uint64_t key_seed) {
  transfer_options options;
  options.key_seed = key_seed;
  options.enable_tcp = false;
  options.enable_shm = false;
  options.enable_rdma = false;
  // Every node's pool blocks and decode pages are grants of this one engine. The table's file
  // is sized to the largest table, but only the slots used are ever touched.
  options.region_capacity = region_table::capacity_max;
  return create(std::move(options));
}

caf::expected<std::shared_ptr<transfer_engine>>
transfer_engine::create_modeled(uint64_t key_seed, std::shared_ptr<modeled_links> links) {
  if (!links)
    return make_error(errc::invalid_argument, "a modeled engine needs its links");
  // In-process copies only: a simulation never touches a GPU, even on a machine that has one.
  transfer_options options;
  options.key_seed = key_seed;
  options.enable_tcp = false;
  options.enable_shm = false;
  options.enable_rdma = false;
  options.enable_cuda = false;
  options.region_capacity = region_table::capacity_max; // as create_local's
  auto engine = create(std::move(options));
  if (!engine)
    return engine;
  (*engine)->impl_->links = std::move(links);
  return engine;
}

transfer_engine::~transfer_engine() {
  {
    std::lock_guard guard{impl_->watchdog_mutex};
    impl_->stopping = true;
  }
  impl_->watchdog_cv.notify_all();
  if (impl_->watchdog.joinable())
    impl_->watchdog.join();
  impl_->end_held();
  for (auto* b : impl_->paths()) // the TCP server first
    b->stop();
}

caf::expected<region_handle> transfer_engine::register_region(uint32_t node, std::byte* base,
                                                              uint64_t length_bytes,
                                                              memory_location where) {
  if (base == nullptr || length_bytes == 0)
    return make_error(errc::invalid_argument, "cannot register a null or empty region");
  if (length_bytes > op_bytes_max)
    return make_error(errc::limit_exceeded,
                      "region of " + std::to_string(length_bytes) + " bytes exceeds the limit");
  if (!impl_->is_local(node))
    return make_error(errc::invalid_argument,
                      "node " + std::to_string(node) + " is not served by this engine");
  device_export device;
  device.location = where;
  if (where.is_gpu()) {
    if (!impl_->cuda)
      return make_error(errc::unavailable, "cannot register GPU memory (" + to_string(where) +
                                               "): " + describe(impl_->cuda_status));
    auto exported = export_device_memory(base, length_bytes, where);
    if (!exported)
      return std::move(exported.error());
    device = *exported;
  }
  auto handle = impl_->table->insert(node, base, length_bytes, impl_->next_key(), device);
  // GPUDirect RDMA is out of scope: GPU regions are never registered with the NICs.
  if (!handle || !impl_->rdma || where.is_gpu())
    return handle;
  // Nobody holds the handle yet, so no peer can use the region before its memory registration.
  if (auto err = impl_->rdma->on_register(*handle, base)) {
    [[maybe_unused]] auto undone = impl_->table->remove(*handle);
    return err;
  }
  return handle;
}

void transfer_engine::set_fault_hook(slice_fault_hook hook, fault_delays delays) {
  impl_->fault_hook = std::move(hook);
  impl_->fault_delay_mode = delays;
}

caf::error transfer_engine::unregister_region(const region_handle& region) {
  // remove() waits for this engine's slices that use the region (RDMA ones pin it as their
  // local buffer); only then may its memory registrations go.
  if (auto err = impl_->table->remove(region, region_table::slot_kind::region))
    return err;
  if (impl_->rdma)
    impl_->rdma->on_unregister(region); // a no-op for GPU regions, which it never registered
  return caf::none;
}

caf::expected<region_handle> transfer_engine::grant(const region_handle& within) {
  if (!impl_->is_local(within.node))
    return make_error(errc::invalid_argument,
                      "node " + std::to_string(within.node) + " is not served by this engine");
  return impl_->table->insert_grant(within, impl_->next_key());
}

caf::error transfer_engine::revoke(const region_handle& grant) {
  // A grant has no memory registration of its own: its region's stays, for its other grants.
  return impl_->table->remove(grant, region_table::slot_kind::grant);
}

uint32_t transfer_engine::grant_count() const {
  return impl_->table->grant_count();
}

// -- conveniences ------------------------------------------------------------------------------

namespace {

caf::error run_one(transfer_engine& e, const transfer_op& op, std::chrono::milliseconds timeout) {
  auto id = e.submit(std::span{&op, 1}, clock_type::now() + timeout);
  if (!id)
    return std::move(id.error());
  auto results = e.wait(*id);
  if (!results)
    return std::move(results.error());
  return std::move(results->at(0).reason);
}

} // namespace

caf::error transfer_engine::read(const region_handle& src, uint64_t offset,
                                 std::span<std::byte> dst, std::chrono::milliseconds timeout) {
  return run_one(*this, transfer_op{op_kind::read, dst, src, offset, false}, timeout);
}

caf::error transfer_engine::write(const region_handle& dst, uint64_t offset,
                                  std::span<const std::byte> src,
                                  std::chrono::milliseconds timeout) {
  // A write only reads its local buffer; the span is non-const because ops are symmetric.
  std::span<std::byte> bytes{const_cast<std::byte*>(src.data()), src.size()};
  return run_one(*this, transfer_op{op_kind::write, bytes, dst, offset, false}, timeout);
}

caf::error transfer_engine::copy(const region_handle& src, const region_handle& dst,
                                 std::chrono::milliseconds timeout) {
  if (!impl_->is_local(src.node))
    return make_error(errc::invalid_argument, "copy needs a source in this process");
  if (dst.length < src.length)
    return make_error(errc::out_of_range, "copy destination is shorter than its source");
  auto bytes = impl_->table->pin_any(src, 0, src.length);
  if (!bytes)
    return std::move(bytes.error());
  auto err = run_one(
      *this, transfer_op{op_kind::write, {bytes->first, src.length}, dst, 0, false, bytes->second},
      timeout);
  impl_->table->unpin(src);
  return err;
}

const char* to_string(op_state s) {
  switch (s) {
  case op_state::pending:
    return "pending";
  case op_state::completed:
    return "completed";
  case op_state::failed:
    return "failed";
  case op_state::timed_out:
    return "timed_out";
  case op_state::cancelled:
    return "cancelled";
  }
  return "unknown";
}

} // namespace crescent::transport
