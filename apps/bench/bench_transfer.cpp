#include "apps/bench/bench_transfer.hpp"

#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/cpu_sets.hpp"
#include "apps/bench/median.hpp"
#include "apps/bench/peer_client.hpp"
#include "apps/bench/transfer_rows.hpp"
#include "messages/errors.hpp"
#include "transport/trace_points.hpp"

#include <caf/io/middleman.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

namespace crescent::bench {

namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

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
      CRESCENT_TRACE(submitted, t);
      auto id = p.engine->submit(ops, clock::now() + std::chrono::seconds(30));
      auto results = id ? p.engine->wait(*id)
                        : caf::expected<std::vector<transport::op_result>>{std::move(id.error())};
      CRESCENT_TRACE(waited, t);
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

// Runs the baseline and the first case in turns, untimed. Here loopback TCP starts at a tenth
// of its speed and takes about 3 s of streaming to reach it (docs/benchmarks-archive.md, sixth
// session): without this the first rows measure the machine warming up, and the earlier of each
// pair the slowest.
caf::error warm_up(const path_rows& p, const bench_case& c, double seconds) {
  const double turn_seconds = std::min(0.25, seconds / 2);
  for (double spent = 0; spent < seconds; spent += 2 * turn_seconds) {
    if (auto base = p.baseline(c, turn_seconds); !base)
      return std::move(base.error());
    if (auto gbps = engine_gbps(p, c, turn_seconds); !gbps)
      return std::move(gbps.error());
  }
  return caf::none;
}

// Runs and prints every case of one path; 1 if one failed.
int print_rows(const path_rows& p, const bench_transfer_options& opt) {
  const auto all = transfer_cases(opt);
  if (auto err = warm_up(p, all.front(), opt.warmup_seconds)) {
    fmt::print(stderr, "bench transfer: {} {}: warming up: {}\n", p.path, to_string(p.local_where),
               describe(err));
    return 1;
  }
  for (const auto& c : all) {
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

// Where the processes run is what each of them reports, not what was asked.
void print_header(const bench_transfer_options& opt, const process_cpus& placed,
                  const std::string& peer_cpus) {
  auto own = allowed_cpus();
  const auto own_cpus = own ? to_text(*own) : "unknown (" + describe(own.error()) + ")";
  fmt::print("crescent bench transfer: two processes on loopback; each row is the median of {} "
             "trials of {:.2f} s, each trial right after its baseline's; each path first warms "
             "up for {:.1f} s\n",
             opt.trials, opt.seconds_per_case, opt.warmup_seconds);
  if (placed.client.empty())
    fmt::print("processes: placed by the kernel (--cpus {}): this one may run on CPUs {}, the "
               "peer on CPUs {}\n",
               opt.cpus, own_cpus, peer_cpus);
  else
    fmt::print("processes: this one on CPUs {}, the peer on CPUs {} (--cpus {}), for the "
               "baselines as for the engine\n",
               own_cpus, peer_cpus, opt.cpus);
  fmt::print("baselines, each single-thread: shm rows: memcpy of the same block size; tcp rows: a "
             "plain TCP stream of 1 MiB writes between the same two processes; cuda rows: "
             "cudaMemcpy of the same block size between the local buffer and GPU memory of this "
             "process\n");
  fmt::print("{:<5} {:<6} {:<6} {:>7} {:>6} {:>8} {:>8} {:>9} {:>9}\n", "path", "local", "op",
             "block", "batch", "threads", "GB/s", "baseline", "ratio");
}

// The grid of the issue; --quick trims it to one batch size and one thread; a row filter given
// on the command line replaces its dimension.
template <class T>
std::vector<T> grid(const std::vector<T>& given, std::vector<T> all, bool quick) {
  if (!given.empty())
    return given;
  if (quick)
    all.resize(1);
  return all;
}

} // namespace

std::vector<bench_case> transfer_cases(const bench_transfer_options& opt) {
  std::vector<transport::op_kind> kinds{transport::op_kind::write, transport::op_kind::read};
  if (!opt.op.empty())
    kinds = {opt.op == "read" ? transport::op_kind::read : transport::op_kind::write};
  std::vector<bench_case> out;
  for (auto kind : kinds)
    for (uint64_t block_kib : grid<uint64_t>(opt.blocks_kib, {64, 1024, 4096}, false))
      for (uint32_t batch : grid<uint32_t>(opt.batches, {16, 128}, opt.quick))
        for (uint32_t threads : grid<uint32_t>(opt.threads, {1, 2}, opt.quick))
          out.push_back({kind, block_kib << 10, batch, threads});
  return out;
}

int bench_transfer(const bench_transfer_options& opt) {
  // Before any thread starts: each inherits the CPUs of the thread that starts it.
  auto cpus = place_this_process(opt.cpus);
  if (!cpus) {
    fmt::print(stderr, "bench transfer: --cpus: {}\n", describe(cpus.error()));
    return 2;
  }
  process_actor_system actors{true};
  auto& sys = actors.get();
  const bool cuda = opt.only.empty() || opt.only == "cuda";
  transfer_peer_options peer_opt;
  peer_opt.region_mib = opt.region_mib;
  peer_opt.gpu_mib = cuda ? opt.region_mib : 0;
  peer_opt.cpus = to_text(cpus->peer);
  auto peer = start_transfer_peer(sys, self_executable(), peer_opt);
  if (!peer) {
    fmt::print(stderr, "bench transfer: {}\n", describe(peer.error()));
    return 2;
  }
  local_buffers buf;
  print_header(opt, *cpus, peer->cpus);
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
