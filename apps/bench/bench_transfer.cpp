#include "apps/bench/bench_transfer.hpp"

#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/median.hpp"
#include "apps/bench/peer_client.hpp"
#include "messages/errors.hpp"
#include "transport/host_memory.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace crescent::bench {

namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

// Copies `block` bytes at a time through buffers larger than the caches, for `seconds`.
double memcpy_gbps(std::byte* src, std::byte* dst, uint64_t span, uint64_t block, double seconds) {
  uint64_t bytes = 0, at = 0;
  const auto start = clock::now();
  while (seconds_since(start) < seconds) {
    for (int i = 0; i < 16; ++i) {
      if (at + block > span)
        at = 0;
      std::memcpy(dst + at, src + at, block);
      at += block;
      bytes += block;
    }
  }
  return static_cast<double>(bytes) / seconds_since(start) / 1e9;
}

// A plain TCP stream of 1 MiB writes into the peer's sink, from `span` bytes of memory walked
// through as the engine's operations walk through theirs (the sink does the same at its end).
caf::expected<double> tcp_stream_gbps(uint16_t port, const std::byte* buf, uint64_t span,
                                      double seconds) {
  auto fd = transport::tcp::connect_to("127.0.0.1", port, std::chrono::seconds(2));
  if (!fd)
    return std::move(fd.error());
  constexpr uint64_t chunk = 1u << 20;
  uint64_t bytes = 0;
  uint64_t at = 0;
  const auto start = clock::now();
  while (seconds_since(start) < seconds) {
    if (at + chunk > span)
      at = 0;
    ssize_t n = send(*fd, buf + at, chunk, MSG_NOSIGNAL);
    if (n <= 0) {
      close(*fd);
      return make_error(errc::io_error, "the sink closed the stream");
    }
    bytes += static_cast<uint64_t>(n);
    at += static_cast<uint64_t>(n);
  }
  const double gbps = static_cast<double>(bytes) / seconds_since(start) / 1e9;
  close(*fd);
  return gbps;
}

struct bench_case {
  transport::op_kind kind;
  uint64_t block;
  uint32_t batch;
  uint32_t threads;
};

// Each thread submits batches of `batch` operations of `block` bytes and waits for them.
caf::expected<double> engine_gbps(transport::transfer_engine& engine,
                                  const transport::region_handle& region, std::byte* local,
                                  uint64_t local_span, const bench_case& c, double seconds) {
  std::atomic<uint64_t> bytes{0};
  std::atomic<bool> failed{false};
  const uint64_t per_thread = local_span / c.threads;
  auto body = [&](uint32_t t) {
    std::vector<transport::transfer_op> ops(c.batch);
    uint64_t remote_at = t * (region.length / c.threads);
    uint64_t local_at = 0;
    const auto start = clock::now();
    while (seconds_since(start) < seconds && !failed) {
      // Both sides walk through memory larger than the caches, as the memcpy baseline does.
      for (uint32_t i = 0; i < c.batch; ++i) {
        if (remote_at + c.block > region.length)
          remote_at = 0;
        if (local_at + c.block > per_thread)
          local_at = 0;
        ops[i] = {c.kind, {local + t * per_thread + local_at, c.block}, region, remote_at, false};
        remote_at += c.block;
        local_at += c.block;
      }
      auto id = engine.submit(ops, clock::now() + std::chrono::seconds(30));
      auto results = id ? engine.wait(*id)
                        : caf::expected<std::vector<transport::op_result>>{std::move(id.error())};
      if (!results)
        failed = true;
      else
        for (auto& r : *results)
          failed = failed || r.state != transport::op_state::completed;
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
    return make_error(errc::io_error, "an operation failed during the benchmark");
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

caf::expected<std::shared_ptr<transport::transfer_engine>>
initiator(bool shm, const remote_peer& peer, uint64_t slice_bytes, uint64_t tcp_slice_bytes,
          uint32_t connections) {
  transport::transfer_options o;
  o.copy_slice_bytes = slice_bytes;
  o.tcp_slice_bytes = tcp_slice_bytes;
  o.tcp_connections_per_peer = connections;
  o.local_nodes = {2};
  o.enable_shm = shm;
  o.enable_tcp = !shm;
  auto e = transport::transfer_engine::create(o);
  if (!e)
    return e;
  if (auto err = (*e)->add_peer(peer.info))
    return err;
  // Steady state: connections open, remote segments mapped, before anything is timed.
  // Writing every page once also takes the write faults of shared mappings out of the timing.
  std::vector<std::byte> probe(4u << 20);
  for (uint64_t at = 0; at + probe.size() <= peer.region.length; at += probe.size())
    if (auto err = (*e)->write(peer.region, at, probe))
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
caf::expected<row> measure(transport::transfer_engine& engine, const remote_peer& peer,
                           transport::host_memory& local, transport::host_memory& scratch,
                           const bench_case& c, bool shm, const bench_transfer_options& opt) {
  std::vector<double> cases, bases, ratios;
  for (uint32_t t = 0; t < opt.trials; ++t) {
    double base = 0;
    if (shm) {
      base = memcpy_gbps(scratch.data(), local.data(), local.size_bytes(), c.block,
                         opt.seconds_per_case);
    } else {
      auto s =
          tcp_stream_gbps(peer.sink_port, local.data(), local.size_bytes(), opt.seconds_per_case);
      if (!s)
        return std::move(s.error());
      base = *s;
    }
    auto gbps =
        engine_gbps(engine, peer.region, local.data(), local.size_bytes(), c, opt.seconds_per_case);
    if (!gbps)
      return std::move(gbps.error());
    cases.push_back(*gbps);
    bases.push_back(base);
    ratios.push_back(*gbps / base);
  }
  return row{median(cases), median(bases), median(ratios)};
}

} // namespace

int bench_transfer(const bench_transfer_options& opt) {
  caf::actor_system_config cfg;
  setup_actor_system(cfg, true);
  caf::actor_system sys{cfg};
  auto peer = start_transfer_peer(sys, self_executable(), {1, opt.region_mib, true, true});
  if (!peer) {
    fmt::print(stderr, "bench transfer: {}\n", describe(peer.error()));
    return 2;
  }
  // Local buffers: 1 GiB covers 2 threads x 128 ops x 4 MiB without overlap.
  const uint64_t local_span = 1ull << 30;
  auto local = transport::host_memory::allocate(local_span);
  auto scratch = transport::host_memory::allocate(local_span);
  if (!local || !scratch) {
    fmt::print(stderr, "bench transfer: cannot allocate benchmark buffers\n");
    return 2;
  }
  fmt::print("crescent bench transfer: two processes on loopback; each row is the median of {} "
             "trials of {:.2f} s, each trial right after its baseline's\n",
             opt.trials, opt.seconds_per_case);
  fmt::print("baseline of shm rows: single-thread memcpy of the same block size; of tcp rows: a "
             "plain TCP stream of 1 MiB writes between the same two processes\n");
  fmt::print("{:<5} {:<6} {:>7} {:>6} {:>8} {:>8} {:>9} {:>9}\n", "path", "op", "block", "batch",
             "threads", "GB/s", "baseline", "ratio");
  for (bool shm : {true, false}) {
    if ((shm && opt.only == "tcp") || (!shm && opt.only == "shm"))
      continue;
    auto engine =
        initiator(shm, *peer, opt.slice_kib << 10, opt.tcp_slice_kib << 10, opt.tcp_connections);
    if (!engine) {
      fmt::print(stderr, "bench transfer: {}\n", describe(engine.error()));
      return 2;
    }
    for (const auto& c : cases(opt.quick)) {
      auto row = measure(**engine, *peer, *local, *scratch, c, shm, opt);
      if (!row) {
        fmt::print(stderr, "bench transfer: {}\n", describe(row.error()));
        return 1;
      }
      fmt::print("{:<5} {:<6} {:>7} {:>6} {:>8} {:>8.2f} {:>9.2f} {:>8.2f}x\n", shm ? "shm" : "tcp",
                 c.kind == transport::op_kind::read ? "read" : "write",
                 c.block >= (1u << 20) ? fmt::format("{} MiB", c.block >> 20)
                                       : fmt::format("{} KiB", c.block >> 10),
                 c.batch, c.threads, row->gbps, row->base_gbps, row->ratio);
    }
  }
  return 0;
}

} // namespace crescent::bench
