#include "apps/bench/bench_transfer.hpp"

#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/median.hpp"
#include "apps/bench/peer_client.hpp"
#include "apps/bench/transfer_baselines.hpp"
#include "messages/errors.hpp"
#include "transport/device_memory.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

namespace crescent::bench {

namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

struct bench_case {
  transport::op_kind kind;
  uint64_t block;
  uint32_t batch;
  uint32_t threads;
};

// One path's rows: the engine and the peer's region they run against, the local buffer, and
// the baseline each row is scaled by.
struct path_rows {
  const char* path;
  std::shared_ptr<transport::transfer_engine> engine;
  transport::region_handle region;
  std::span<std::byte> local;
  transport::memory_location local_where;
  std::function<caf::expected<double>(const bench_case&, double seconds)> baseline;
};

// Each thread submits batches of `batch` operations of `block` bytes and waits for them.
caf::expected<double> engine_gbps(const path_rows& p, const bench_case& c, double seconds) {
  std::atomic<uint64_t> bytes{0};
  std::atomic<bool> failed{false};
  std::mutex first_error_mutex;
  caf::error first_error; // what to print: no one can debug a device run afterwards
  auto fail = [&](caf::error err) {
    std::lock_guard guard{first_error_mutex};
    if (!first_error)
      first_error = std::move(err);
    failed = true;
  };
  const uint64_t per_thread = p.local.size() / c.threads;
  auto body = [&](uint32_t t) {
    std::vector<transport::transfer_op> ops(c.batch);
    uint64_t remote_at = t * (p.region.length / c.threads);
    uint64_t local_at = 0;
    const auto start = clock::now();
    while (seconds_since(start) < seconds && !failed) {
      // Both sides walk through memory larger than the caches, as the baselines do.
      for (uint32_t i = 0; i < c.batch; ++i) {
        if (remote_at + c.block > p.region.length)
          remote_at = 0;
        if (local_at + c.block > per_thread)
          local_at = 0;
        ops[i] = {c.kind,   p.local.subspan(t * per_thread + local_at, c.block),
                  p.region, remote_at,
                  false,    p.local_where};
        remote_at += c.block;
        local_at += c.block;
      }
      auto id = p.engine->submit(ops, clock::now() + std::chrono::seconds(30));
      auto results = id ? p.engine->wait(*id)
                        : caf::expected<std::vector<transport::op_result>>{std::move(id.error())};
      if (!results)
        fail(std::move(results.error()));
      else
        for (auto& r : *results)
          if (r.state != transport::op_state::completed)
            fail(r.reason ? r.reason : make_error(errc::internal, transport::to_string(r.state)));
      bytes += uint64_t{c.batch} * c.block;
    }
  };
  const auto start = clock::now();
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < c.threads; ++t)
    workers.emplace_back(body, t);
  for (auto& w : workers)
    w.join();
  if (failed)
    return make_error(errc::io_error, "an operation failed: " + describe(first_error));
  return static_cast<double>(bytes.load()) / seconds_since(start) / 1e9;
}

std::vector<bench_case> cases(bool quick) {
  std::vector<bench_case> out;
  for (auto kind : {transport::op_kind::write, transport::op_kind::read})
    for (uint64_t block : {64ull << 10, 1ull << 20, 4ull << 20})
      for (uint32_t batch : quick ? std::vector<uint32_t>{16} : std::vector<uint32_t>{16, 128})
        for (uint32_t threads : quick ? std::vector<uint32_t>{1} : std::vector<uint32_t>{1, 2})
          out.push_back({kind, block, batch, threads});
  return out;
}

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

struct row {
  double gbps = 0;
  double base_gbps = 0;
  double ratio = 0;
};

// Trials alternate baseline and case, each as long, so that the machine's drift hits both; the
// row reports the medians.
caf::expected<row> measure(const path_rows& p, const bench_case& c,
                           const bench_transfer_options& opt) {
  std::vector<double> cases, bases, ratios;
  for (uint32_t t = 0; t < opt.trials; ++t) {
    auto base = p.baseline(c, opt.seconds_per_case);
    if (!base)
      return std::move(base.error());
    auto gbps = engine_gbps(p, c, opt.seconds_per_case);
    if (!gbps)
      return std::move(gbps.error());
    cases.push_back(*gbps);
    bases.push_back(*base);
    ratios.push_back(*gbps / *base);
  }
  return row{median(cases), median(bases), median(ratios)};
}

std::string block_text(uint64_t block) {
  return block >= (1u << 20) ? fmt::format("{} MiB", block >> 20)
                             : fmt::format("{} KiB", block >> 10);
}

// Runs and prints every case of one path; 1 if one failed.
int print_rows(const path_rows& p, const bench_transfer_options& opt) {
  for (const auto& c : cases(opt.quick)) {
    auto r = measure(p, c, opt);
    if (!r) {
      fmt::print(stderr, "bench transfer: {} {}: {}\n", p.path, to_string(p.local_where),
                 describe(r.error()));
      return 1;
    }
    fmt::print("{:<5} {:<6} {:<6} {:>7} {:>6} {:>8} {:>8.2f} {:>9.2f} {:>8.2f}x\n", p.path,
               to_string(p.local_where), c.kind == transport::op_kind::read ? "read" : "write",
               block_text(c.block), c.batch, c.threads, r->gbps, r->base_gbps, r->ratio);
    std::fflush(stdout);
  }
  return 0;
}

// The buffers of the rows, each allocated when a path first needs it (pre-touching 1 GiB takes
// seconds here): local host memory for every path, the memcpy baseline's other end for shm, and
// for the cuda rows a local GPU buffer and a GPU target for the cudaMemcpy baseline.
struct local_buffers {
  // 1 GiB covers 2 threads x 128 ops x 4 MiB without overlap.
  static constexpr uint64_t host_bytes = 1ull << 30;

  transport::host_memory host;
  transport::host_memory scratch;
  transport::device_memory gpu;
  transport::device_memory gpu_target;

  caf::error need(transport::host_memory& m) {
    if (m.data() != nullptr)
      return caf::none;
    auto allocated = transport::host_memory::allocate(host_bytes);
    if (!allocated)
      return std::move(allocated.error());
    m = std::move(*allocated);
    return caf::none;
  }
};

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

// Why this process has no cuda path (no CUDA in this binary, no GPU), or none if it has one.
caf::error why_no_cuda() {
  transport::transfer_options o;
  o.local_nodes = {2};
  o.enable_tcp = false;
  auto e = transport::transfer_engine::create(o);
  if (!e)
    return std::move(e.error());
  return (*e)->cuda_status();
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

// The rows of `path` ("shm", "tcp" or "cuda"); an error says why there are none.
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

void print_header(const bench_transfer_options& opt) {
  fmt::print("crescent bench transfer: two processes on loopback; each row is the median of {} "
             "trials of {:.2f} s, each trial right after its baseline's\n",
             opt.trials, opt.seconds_per_case);
  fmt::print("baselines, each single-thread: shm rows: memcpy of the same block size; tcp rows: a "
             "plain TCP stream of 1 MiB writes between the same two processes; cuda rows: "
             "cudaMemcpy of the same block size between the local buffer and GPU memory of this "
             "process\n");
  fmt::print("{:<5} {:<6} {:<6} {:>7} {:>6} {:>8} {:>8} {:>9} {:>9}\n", "path", "local", "op",
             "block", "batch", "threads", "GB/s", "baseline", "ratio");
}

} // namespace

int bench_transfer(const bench_transfer_options& opt) {
  caf::actor_system_config cfg;
  setup_actor_system(cfg, true);
  caf::actor_system sys{cfg};
  const bool cuda = opt.only.empty() || opt.only == "cuda";
  auto peer = start_transfer_peer(sys, self_executable(),
                                  {1, opt.region_mib, true, true, cuda ? opt.region_mib : 0});
  if (!peer) {
    fmt::print(stderr, "bench transfer: {}\n", describe(peer.error()));
    return 2;
  }
  local_buffers buf;
  print_header(opt);
  for (std::string_view path : {"shm", "tcp", "cuda"}) {
    if (!opt.only.empty() && opt.only != path)
      continue;
    if (path == "cuda")
      if (auto why = why_no_cuda()) { // the only reason to skip: anything else is a failure
        fmt::print("{:<5} skipped: {}\n", path, describe(why));
        continue;
      }
    auto rows = rows_of(path, *peer, buf, opt);
    if (!rows) {
      fmt::print(stderr, "bench transfer: {}: {}\n", path, describe(rows.error()));
      return 2;
    }
    for (const auto& p : *rows)
      if (int rc = print_rows(p, opt); rc != 0)
        return rc;
  }
  return 0;
}

} // namespace crescent::bench
