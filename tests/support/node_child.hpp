// A `crescent node` child process on loopback and any free port, for the tests that spread a
// cluster over processes (tests/system/hosted_node_test.cpp, serve_test.cpp).
#pragma once

#include "apps/bench/child_process.hpp"
#include "messages/errors.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace crescent::testing {

struct node_process {
  bench::child_process process;
  uint16_t port = 0;
};

/// Starts `crescent node` for node `n` of the cluster file `config_file` on `port` (0: any free
/// one) and waits for its ready line (it names the port it listens on).
inline caf::expected<node_process> start_node_process(const std::string& config_file, uint32_t n,
                                                      uint16_t port = 0) {
  auto p = bench::child_process::spawn(CRESCENT_BINARY,
                                       {"node", "--config", config_file, "--node",
                                        std::to_string(n), "--port", std::to_string(port)});
  if (!p)
    return std::move(p.error());
  auto line = p->read_line(std::chrono::seconds(20));
  if (!line)
    return std::move(line.error());
  const auto at = line->find("port=");
  if (line->rfind("crescent-node ", 0) != 0 || at == std::string::npos)
    return make_error(errc::internal, "unexpected ready line: " + *line);
  const auto listening = static_cast<uint16_t>(std::stoul(line->substr(at + 5)));
  return node_process{std::move(*p), listening};
}

} // namespace crescent::testing
