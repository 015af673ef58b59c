#include "apps/bench/bench_store.hpp"

#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/baseline_servers.hpp"
#include "apps/bench/median.hpp"
#include "apps/bench/store_phase.hpp"
#include "apps/pool/pool_client.hpp"
#include "apps/pool/pool_launch.hpp"
#include "messages/errors.hpp"
#include "messages/xxh3.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

namespace crescent::bench {

namespace {

constexpr uint32_t first_client_node = 32; // client node ids: no owner runs there

// One client of the pool: a put is acknowledged once the master synced its commit.
class pool_kv_client final : public kv_client {
 public:
  pool_kv_client(std::unique_ptr<pool::pool_client> c, uint32_t replicas)
      : client_(std::move(c)), replicas_(replicas) {}

  caf::error put(block_key key, std::span<const std::byte> value) override {
    const block_key keys[] = {key};
    const std::span<const std::byte> values[] = {value};
    auto done = client_->put(keys, values, replicas_);
    if (!done)
      return std::move(done.error());
    if (done->size() != 1)
      return make_error(errc::unavailable, "the pool did not acknowledge the put");
    return caf::none;
  }

  caf::expected<bool> get(block_key key, std::span<std::byte> out) override {
    const block_key keys[] = {key};
    const std::span<std::byte> outs[] = {out};
    auto got = client_->get(keys, outs);
    if (!got)
      return std::move(got.error());
    return (*got)[0];
  }

  pool::pool_client& pool() { return *client_; }

 private:
  std::unique_ptr<pool::pool_client> client_;
  uint32_t replicas_;
};

// The pool's processes; they exit when this goes (their standard input closes).
struct pool_processes {
  std::string dir;
  std::optional<child_process> master;
  std::vector<child_process> nodes;
  uint16_t port = 0;

  ~pool_processes() {
    nodes.clear();
    master.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

caf::error start_pool(pool_processes& p, const bench_store_options& opt, uint64_t dram_mib) {
  p.dir = (std::filesystem::temp_directory_path() /
           ("crescent-bench-store-" + std::to_string(getpid())))
              .string();
  std::filesystem::remove_all(p.dir);
  std::filesystem::create_directories(p.dir);
  std::vector<std::string> margs{"--nodes", std::to_string(opt.nodes), "--db", p.dir + "/metadata"};
  if (!opt.sync_commits)
    margs.push_back("--no-sync");
  auto m = pool::launch_master(self_executable(), margs, std::chrono::seconds(30));
  if (!m)
    return std::move(m.error());
  p.port = m->port;
  p.master.emplace(std::move(m->process));
  for (uint32_t n = 0; n < opt.nodes; ++n) {
    std::vector<std::string> args{"--node",        std::to_string(n),
                                  "--master-port", std::to_string(p.port),
                                  "--dram-mib",    std::to_string(dram_mib)};
    if (opt.tcp)
      args.push_back("--no-shm");
    auto c = pool::launch_node(self_executable(), args, std::chrono::seconds(60));
    if (!c)
      return std::move(c.error());
    p.nodes.emplace_back(std::move(*c));
  }
  return caf::none;
}

struct system_under_test {
  std::string name;
  std::vector<std::unique_ptr<kv_client>> clients;
};

caf::expected<system_under_test> connect_all(const std::string& name, uint32_t count,
                                             const kv_client_factory& connect) {
  system_under_test s{name, {}};
  for (uint32_t c = 0; c < count; ++c) {
    auto client = connect();
    if (!client)
      return std::move(client.error());
    s.clients.push_back(std::move(*client));
  }
  return s;
}

// Removes the keys run_phase gave `clients` (untimed); the first failure's reason, or empty.
std::string remove_phase(const std::vector<pool_kv_client*>& clients, uint64_t ops_per_client,
                         uint64_t key_base) {
  std::vector<block_key> keys;
  for (uint64_t k = 0; k < clients.size() * ops_per_client; ++k) {
    keys.push_back(block_key{0, key_base + k});
    if (keys.size() == pool::get_combiner::keys_max || k + 1 == clients.size() * ops_per_client) {
      if (auto err = clients.front()->pool().remove(keys))
        return "remove: " + describe(err);
      keys.clear();
    }
  }
  return {};
}

struct row_key {
  uint64_t size;
  bool put;
  std::string system;
  auto operator<=>(const row_key&) const = default;
};

std::string size_text(uint64_t bytes) {
  return bytes >= (1u << 20) ? fmt::format("{} MiB", bytes >> 20)
                             : fmt::format("{} KiB", bytes >> 10);
}

} // namespace

int bench_store(const bench_store_options& opt) {
  if (opt.clients == 0 || opt.sizes_kib.empty() || opt.trials == 0 || opt.get_rounds == 0) {
    fmt::print(stderr, "bench store: needs clients, sizes and trials\n");
    return 2;
  }
  // Every trial writes fresh keys (the pool keeps the first value of a key).
  uint64_t total_mib = 0;
  for (auto s : opt.sizes_kib)
    total_mib += std::max<uint64_t>(opt.mib_per_phase, (s * opt.clients + 1023) / 1024);
  total_mib *= opt.trials * opt.replicas;
  const uint64_t dram_mib = total_mib * 5 / 4 / opt.nodes + 64; // below the eviction watermark
  process_actor_system actors{true};
  auto& sys = actors.get();
  pool_processes pool;
  if (auto err = start_pool(pool, opt, dram_mib)) {
    fmt::print(stderr, "bench store: cannot start the pool: {}\n", describe(err));
    return 2;
  }
  std::vector<system_under_test> systems;
  auto combiner = opt.combine_gets ? std::make_shared<pool::get_combiner>() : nullptr;
  std::vector<pool_kv_client*> pool_clients;
  {
    // One transfer engine for every client, as one serving process has: the first client makes
    // it and learns the owners; the others copy through it.
    uint32_t next = first_client_node;
    std::shared_ptr<transport::transfer_engine> engine;
    auto s =
        connect_all("crescent", opt.clients, [&]() -> caf::expected<std::unique_ptr<kv_client>> {
          auto c =
              pool::pool_client::connect(sys, "127.0.0.1", pool.port, next++, combiner, engine);
          if (!c)
            return std::move(c.error());
          if (!engine) {
            if (auto err = (*c)->await_owners(opt.nodes, std::chrono::seconds(30)))
              return err;
            engine = (*c)->shared_engine();
          }
          auto kv = std::make_unique<pool_kv_client>(std::move(*c), opt.replicas);
          pool_clients.push_back(kv.get());
          return std::unique_ptr<kv_client>{std::move(kv)};
        });
    if (!s) {
      fmt::print(stderr, "bench store: cannot connect to the pool: {}\n", describe(s.error()));
      return 2;
    }
    systems.push_back(std::move(*s));
  }
  const uint64_t largest = *std::max_element(opt.sizes_kib.begin(), opt.sizes_kib.end()) << 10;
  std::vector<baseline_server> servers;
  if (opt.only.empty()) {
    for (auto* start :
         {+[](uint64_t mib, uint64_t largest) { return start_memcached(mib, largest); },
          +[](uint64_t mib, uint64_t) { return start_redis(mib); }}) {
      // Room for every trial's values, with their allocators' rounding: jemalloc keeps a 2 MiB
      // value in a 2.5 MiB size class, and Redis refused sets with only the values' bytes.
      auto server = start(total_mib * 3 / 2 + 256, largest);
      if (!server) {
        fmt::print("bench store: baseline skipped: {}\n", describe(server.error()));
        continue;
      }
      auto s = connect_all(server->name, opt.clients, server->connect);
      if (!s) {
        fmt::print("bench store: baseline {} skipped: {}\n", server->name, describe(s.error()));
        continue;
      }
      systems.push_back(std::move(*s));
      servers.push_back(std::move(*server));
    }
  }
  fmt::print("crescent bench store: {} clients in one process; pool: a master and {} node "
             "processes on loopback, {} replica(s), bytes over {}, commits {}, concurrent gets "
             "{}; gets read every value {} times; each row is the median of {} trials; "
             "checksums: XXH3 {} build\n",
             opt.clients, opt.nodes, opt.replicas, opt.tcp ? "tcp" : "shared memory",
             opt.sync_commits ? "synced" : "not synced",
             opt.combine_gets ? "combined" : "sent alone", opt.get_rounds, opt.trials,
             xxh3_64_path());
  std::map<row_key, std::vector<phase_result>> results;
  bool failed = false;
  auto key_base_of = [](uint32_t trial, size_t size_index) {
    return (uint64_t{trial} * 64 + size_index) << 32;
  };
  auto ops_of = [&](uint64_t size) {
    return std::max<uint64_t>(1, (opt.mib_per_phase << 20) / size / opt.clients);
  };
  // A first touch of a page costs more than the put itself on this VM (memcached stored 512 KiB
  // values 12x faster into memory it had used before), and for the pool's writer it is its own
  // mapping of an owner's memory that is touched, whatever the owner touched. So every system
  // first stores as much as its timed trials will, untimed: each baseline every key of every
  // trial (its timed puts then replace values in memory it has touched); the pool, which keeps
  // the first value of a key, other keys that it then removes (its timed puts then go to space
  // its clients have written before).
  for (auto& s : systems) {
    const bool pool = s.name == "crescent";
    auto warm_key_base = [&](uint32_t t, size_t si) {
      return key_base_of(pool ? opt.trials + t : t, si);
    };
    for (uint32_t t = 0; t < opt.trials; ++t)
      for (size_t si = 0; si < opt.sizes_kib.size(); ++si) {
        const uint64_t size = opt.sizes_kib[si] << 10;
        auto r = run_phase(s.clients, true, size, ops_of(size), warm_key_base(t, si));
        if (r.errors > 0) {
          failed = true;
          fmt::print(stderr, "bench store: {} warm-up put {}: {} errors: {}\n", s.name,
                     size_text(size), r.errors, r.first_error);
        }
      }
    // The pool's: all stored first, then all removed, so that they covered as much as the
    // trials will hold.
    for (uint32_t t = 0; pool && t < opt.trials; ++t)
      for (size_t si = 0; si < opt.sizes_kib.size(); ++si)
        if (auto err =
                remove_phase(pool_clients, ops_of(opt.sizes_kib[si] << 10), warm_key_base(t, si));
            !err.empty()) {
          failed = true;
          fmt::print(stderr, "bench store: crescent warm-up: {}\n", err);
        }
  }
  for (uint32_t t = 0; t < opt.trials; ++t)
    for (size_t si = 0; si < opt.sizes_kib.size(); ++si) {
      const uint64_t size = opt.sizes_kib[si] << 10;
      const uint64_t ops = ops_of(size);
      const uint64_t key_base = key_base_of(t, si);
      for (auto& s : systems)
        for (bool put : {true, false}) {
          auto r = run_phase(s.clients, put, size, ops, key_base, put ? 1 : opt.get_rounds);
          if (r.errors + r.wrong + r.misses > 0) {
            failed = true;
            fmt::print(stderr, "bench store: {} {} {}: {} errors, {} wrong, {} misses{}{}\n",
                       s.name, put ? "put" : "get", size_text(size), r.errors, r.wrong, r.misses,
                       r.first_error.empty() ? "" : ": ", r.first_error);
          }
          results[{size, put, s.name}].push_back(r);
        }
    }
  fmt::print("{:<8} {:<4} {:<10} {:>9} {:>7} {:>9} {:>9} {:>13} {:>9}\n", "size", "op", "system",
             "ops/s", "GB/s", "p50 us", "p99 us", "vs memcached", "vs redis");
  auto ops_per_s = [&](const row_key& k) {
    auto i = results.find(k);
    if (i == results.end())
      return 0.0;
    std::vector<double> v;
    for (const auto& r : i->second)
      v.push_back(static_cast<double>(r.ops) / r.seconds);
    return median(v);
  };
  for (auto size_kib : opt.sizes_kib)
    for (bool put : {true, false})
      for (const auto& s : systems) {
        const row_key k{size_kib << 10, put, s.name};
        const auto& rs = results[k];
        std::vector<double> gbps, p50, p99;
        for (const auto& r : rs) {
          gbps.push_back(static_cast<double>(r.bytes) / r.seconds / 1e9);
          p50.push_back(r.p50_us);
          p99.push_back(r.p99_us);
        }
        auto ratio = [&](const char* base) {
          const double b = ops_per_s({k.size, put, base});
          return b > 0 && s.name != base ? fmt::format("{:.2f}x", ops_per_s(k) / b)
                                         : std::string{"-"};
        };
        fmt::print("{:<8} {:<4} {:<10} {:>9.0f} {:>7.2f} {:>9.0f} {:>9.0f} {:>13} {:>9}\n",
                   size_text(k.size), put ? "put" : "get", s.name, ops_per_s(k), median(gbps),
                   median(p50), median(p99), ratio("memcached"), ratio("redis"));
      }
  if (combiner && combiner->requests() > 0)
    fmt::print("crescent: {} gets went to the master in {} requests ({:.1f} per request)\n",
               combiner->gets(), combiner->requests(),
               static_cast<double>(combiner->gets()) / static_cast<double>(combiner->requests()));
  for (auto& s : servers)
    if (s.process)
      s.process->kill(); // neither exits when its standard input closes
  return failed ? 1 : 0;
}

} // namespace crescent::bench
