// Starting the pool's processes from another process (the multi-process tests, the store
// benchmark): a `crescent pool-master` or `crescent pool-node` child, returned once it said it
// is ready (pool_processes.hpp has the lines they print).
#pragma once

#include "apps/bench/child_process.hpp"

#include <caf/expected.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace crescent::pool {

struct launched_master {
  bench::child_process process;
  uint16_t port = 0; // where it published the store master
};

/// `binary pool-master <args>`; waits at most `timeout` for its ready line.
caf::expected<launched_master> launch_master(const std::string& binary,
                                             const std::vector<std::string>& args,
                                             std::chrono::milliseconds timeout);

/// `binary pool-node <args>`; waits at most `timeout` for its ready line.
caf::expected<bench::child_process> launch_node(const std::string& binary,
                                                const std::vector<std::string>& args,
                                                std::chrono::milliseconds timeout);

} // namespace crescent::pool
