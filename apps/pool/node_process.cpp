#include "actors/block_owner/block_owner.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "apps/pool/pool_processes.hpp"
#include "messages/errors.hpp"
#include "transport/region_table.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <fmt/format.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

namespace crescent::pool {

namespace {

constexpr uint64_t block_unit = 4096;

caf::expected<store_master_actor> connect(caf::actor_system& sys, const node_process_options& o) {
  return sys.middleman().remote_actor<store_master_actor>(o.master_host, o.master_port);
}

// Joins the master, and again each time it comes back, until standard input closes.
void supervise(caf::actor_system& sys, block_owner_actor owner, const node_process_options& o,
               std::atomic<bool>& done) {
  caf::scoped_actor self{sys};
  uint64_t failures = 0;
  while (!done) {
    auto master = connect(sys, o);
    if (!master) {
      if (failures++ % 50 == 0) // say so every few seconds, not every try
        fmt::print(stderr, "pool-node {}: cannot reach the master at {}:{}: {}\n", o.node,
                   o.master_host, o.master_port, sys.render(master.error()));
      poll(nullptr, 0, 100); // the master is restarting: try again shortly
      continue;
    }
    failures = 0;
    self->send(owner, join_atom::value, *master);
    self->monitor(*master);
    bool gone = false;
    while (!gone && !done)
      self->receive([&](caf::down_msg&) { gone = true; },
                    caf::after(std::chrono::milliseconds(200)) >> [] {});
  }
}

} // namespace

int run_node_process(const node_process_options& opt) {
  if (opt.master_port == 0 || opt.dram_mib == 0) {
    fmt::print(stderr, "pool-node: needs --master-port and a DRAM tier\n");
    return 2;
  }
  if (opt.file_size_limit_bytes > 0) {
    const rlimit fsize{opt.file_size_limit_bytes, opt.file_size_limit_bytes};
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit(RLIMIT_FSIZE, &fsize) != 0) {
      fmt::print(stderr, "pool-node: cannot limit file sizes: {}\n", std::strerror(errno));
      return 2;
    }
  }
  transport::transfer_options topt;
  topt.local_nodes = {opt.node};
  topt.enable_shm = opt.shm;
  // The node registers one region, its arena, and a grant per block in it: a table sized to
  // that keeps the shared file that other processes map at what the arena needs (192 bytes a
  // slot) instead of 48 MiB.
  const uint64_t dram = opt.dram_mib << 20;
  const uint64_t blocks_max =
      std::min<uint64_t>(dram / block_unit, transport::region_table::capacity_max - 64);
  topt.region_capacity = static_cast<uint32_t>(blocks_max + 64);
  auto engine = transport::transfer_engine::create(topt);
  if (!engine) {
    fmt::print(stderr, "pool-node: {}\n", describe(engine.error()));
    return 2;
  }
  auto arena =
      storage::dram_arena::create(*engine, opt.node, dram, static_cast<uint32_t>(blocks_max));
  if (!arena) {
    fmt::print(stderr, "pool-node: {}\n", describe(arena.error()));
    return 2;
  }
  std::shared_ptr<storage::ssd_tier> ssd;
  if (opt.ssd_mib > 0) {
    storage::ssd_options sopt;
    sopt.directory = opt.ssd_dir;
    sopt.capacity_bytes = opt.ssd_mib << 20;
    sopt.blocks_max = static_cast<uint32_t>(sopt.capacity_bytes / block_unit);
    auto tier = storage::ssd_tier::open(sopt);
    if (!tier) {
      fmt::print(stderr, "pool-node: {}\n", describe(tier.error()));
      return 2;
    }
    ssd = std::move(*tier);
  }
  process_actor_system actors{true};
  auto& sys = actors.get();
  block_owner_options bopt;
  bopt.node = opt.node;
  bopt.policy = opt.policy;
  auto owner = spawn_block_owner(
      sys, bopt,
      {std::move(*arena), std::move(ssd), store_master_actor{}, (*engine)->self_info(), {}});
  caf::anon_send(owner, start_atom::value);
  fmt::print("crescent-pool-node node={} pid={}\n", opt.node, getpid());
  std::fflush(stdout);
  std::atomic<bool> done{false};
  std::thread supervisor([&] { supervise(sys, owner, opt, done); });
  char c;
  while (::read(STDIN_FILENO, &c, 1) > 0) {
  }
  done = true;
  supervisor.join();
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace crescent::pool
