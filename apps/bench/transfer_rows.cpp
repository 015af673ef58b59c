#include "apps/bench/transfer_rows.hpp"

#include "apps/bench/transfer_baselines.hpp"
#include "messages/errors.hpp"

namespace crescent::bench {

caf::error local_buffers::need(transport::host_memory& m) {
  if (m.data() != nullptr)
    return caf::none;
  auto allocated = transport::host_memory::allocate(host_bytes);
  if (!allocated)
    return std::move(allocated.error());
  m = std::move(*allocated);
  return caf::none;
}

namespace {

// An engine of node 2 that reaches the peer by `path` only, in steady state: connections
// open, the peer's memory mapped or opened, before anything is timed. Writing every page of
// the region once also takes the write faults of shared mappings out of the timing.
caf::expected<std::shared_ptr<transport::transfer_engine>>
initiator(std::string_view path, const remote_peer& peer, const transport::region_handle& region,
          const bench_transfer_options& opt) {
  transport::transfer_options o;
  o.copy_slice_bytes = opt.slice_kib << 10;
  o.tcp_slice_bytes = opt.tcp_slice_kib << 10;
  o.tcp_connections_per_peer = opt.tcp_connections;
  o.local_nodes = {2};
  o.enable_shm = path != "tcp";
  o.enable_tcp = path == "tcp";
  o.enable_cuda = path == "cuda";
  o.enable_rdma = false;
  auto e = transport::transfer_engine::create(o);
  if (!e)
    return e;
  if (auto err = (*e)->add_peer(peer.info))
    return err;
  std::vector<std::byte> probe(4u << 20);
  for (uint64_t at = 0; at + probe.size() <= region.length; at += probe.size())
    if (auto err = (*e)->write(region, at, probe))
      return err;
  return e;
}

// The baseline of a cuda row: cudaMemcpy between the row's local buffer and GPU memory of this
// process, in the row's direction.
auto cuda_baseline(std::span<std::byte> local, const transport::device_memory& target) {
  return [=, &target](const bench_case& c, double seconds) {
    std::byte* gpu = target.data();
    const uint64_t gpu_span = target.size_bytes();
    return c.kind == transport::op_kind::write
               ? cuda_memcpy_gbps(local.data(), local.size(), gpu, gpu_span, c.block, 0, seconds)
               : cuda_memcpy_gbps(gpu, gpu_span, local.data(), local.size(), c.block, 0, seconds);
  };
}

// The cuda rows: the peer's GPU region, from a local buffer in host memory, then from one on
// the GPU. Any error is a failure: where there is no GPU the caller skips them before this.
caf::expected<std::vector<path_rows>> cuda_rows(const remote_peer& peer, local_buffers& buf,
                                                const bench_transfer_options& opt) {
  if (!peer.gpu_region)
    return make_error(errc::unavailable,
                      "the peer process has no GPU region: " + describe(peer.gpu_region.error()));
  auto engine = initiator("cuda", peer, *peer.gpu_region, opt);
  if (!engine)
    return std::move(engine.error());
  if (auto err = buf.need(buf.host))
    return err;
  auto gpu = transport::device_memory::allocate(local_buffers::host_bytes, 0);
  if (!gpu)
    return std::move(gpu.error());
  auto target = transport::device_memory::allocate(peer.gpu_region->length, 0);
  if (!target)
    return std::move(target.error());
  buf.gpu = std::move(*gpu);
  buf.gpu_target = std::move(*target);
  std::span<std::byte> gpu_local{buf.gpu.data(), buf.gpu.size_bytes()};
  return std::vector<path_rows>{
      {"cuda", *engine, *peer.gpu_region, buf.host.bytes(), transport::memory_location::cpu(),
       cuda_baseline(buf.host.bytes(), buf.gpu_target)},
      {"cuda", *engine, *peer.gpu_region, gpu_local, transport::memory_location::cuda(0),
       cuda_baseline(gpu_local, buf.gpu_target)}};
}

} // namespace

caf::error why_no_cuda() {
  transport::transfer_options o;
  o.local_nodes = {2};
  o.enable_tcp = false;
  auto e = transport::transfer_engine::create(o);
  if (!e)
    return std::move(e.error());
  return (*e)->cuda_status();
}

caf::expected<std::vector<path_rows>> rows_of(std::string_view path, const remote_peer& peer,
                                              local_buffers& buf,
                                              const bench_transfer_options& opt) {
  if (path == "cuda")
    return cuda_rows(peer, buf, opt);
  auto engine = initiator(path, peer, peer.region, opt);
  if (!engine)
    return std::move(engine.error());
  if (auto err = buf.need(buf.host))
    return err;
  if (auto err = path == "shm" ? buf.need(buf.scratch) : caf::error{})
    return err;
  path_rows p{path == "shm" ? "shm" : "tcp",     *engine, peer.region, buf.host.bytes(),
              transport::memory_location::cpu(), {}};
  if (path == "shm")
    p.baseline = [&buf](const bench_case& c, double seconds) -> caf::expected<double> {
      return memcpy_gbps(buf.scratch.data(), buf.host.data(), buf.host.size_bytes(), c.block,
                         seconds);
    };
  else
    p.baseline = [&buf, port = peer.sink_port](const bench_case&, double seconds) {
      return tcp_stream_gbps(port, buf.host.data(), buf.host.size_bytes(), seconds);
    };
  return std::vector<path_rows>{std::move(p)};
}

} // namespace crescent::bench
