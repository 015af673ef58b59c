#include "actors/common/actor_system_setup.hpp"
#include "actors/store_master/store_master.hpp"
#include "apps/pool/pool_processes.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <fmt/format.h>
#include <unistd.h>

namespace crescent::pool {

int run_master_process(const master_process_options& opt) {
  if (opt.db_path.empty() || opt.nodes == 0 || opt.nodes > 64) {
    fmt::print(stderr, "pool-master: needs --db and 1 to 64 --nodes\n");
    return 2;
  }
  storage::object_options oopt;
  oopt.sync_commits = opt.sync_commits;
  oopt.nodes = opt.nodes;
  auto objects = storage::object_store::open(opt.db_path, oopt);
  if (!objects) {
    fmt::print(stderr, "pool-master: {}\n", describe(objects.error()));
    return 2;
  }
  process_actor_system actors{true};
  auto& sys = actors.get();
  store_master_options mopt;
  mopt.nodes = opt.nodes;
  mopt.put_timeout = std::chrono::milliseconds(opt.put_timeout_ms);
  mopt.lease_ttl = std::chrono::milliseconds(opt.lease_ttl_ms);
  mopt.node_timeout = std::chrono::milliseconds(opt.node_timeout_ms);
  mopt.ssd_grace = std::chrono::milliseconds(opt.ssd_grace_ms);
  // No directory: owners join by reporting.
  auto master = spawn_store_master(sys, mopt, std::move(*objects), directory_ref{});
  caf::anon_send(master, start_atom::value);
  auto port = sys.middleman().publish(master, opt.port, "127.0.0.1", true);
  if (!port) {
    fmt::print(stderr, "pool-master: cannot publish on port {}: {}\n", opt.port,
               sys.render(port.error()));
    caf::anon_send_exit(master, caf::exit_reason::user_shutdown);
    return 2;
  }
  fmt::print("crescent-pool-master port={} pid={}\n", *port, getpid());
  std::fflush(stdout);
  char c;
  while (::read(STDIN_FILENO, &c, 1) > 0) {
  }
  caf::anon_send_exit(master, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace crescent::pool
