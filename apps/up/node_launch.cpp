#include "apps/up/node_launch.hpp"

#include "apps/up/netns.hpp"

#include "messages/errors.hpp"

#include <signal.h>

#include <fstream>

namespace crescent::up {

namespace {

std::string fill(std::string text, const std::string& name, const std::string& value) {
  const std::string key = "{" + name + "}";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

// 'text', any ' in it closed, escaped and reopened.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

} // namespace

std::vector<std::string> launch_command(const cluster_config& cfg, const std::string& config_path,
                                        uint32_t node, const std::vector<std::string>& flags) {
  const auto self = bench::self_executable();
  if (cfg.launcher.empty()) {
    std::vector<std::string> out{self,        "node",   "--config",
                                 config_path, "--node", std::to_string(node)};
    out.insert(out.end(), flags.begin(), flags.end());
    return out;
  }
  std::string quoted;
  for (const auto& f : flags)
    quoted += (quoted.empty() ? "" : " ") + shell_quote(f);
  auto address = parse_node_address(cfg.nodes.at(node).address);
  std::string command = cfg.launcher;
  command = fill(command, "crescent", self);
  command = fill(command, "config", config_path);
  command = fill(command, "node", std::to_string(node));
  command = fill(command, "host", address ? address->host : "");
  command = fill(command, "port", address ? std::to_string(address->port) : "");
  command = fill(command, "faults", quoted);
  return {"/bin/sh", "-c", command};
}

namespace {

caf::expected<bench::child_process> spawn_node(const cluster_config& cfg,
                                               const std::string& config_path, uint32_t n,
                                               const std::string& log, const netns_network* network,
                                               const std::vector<std::string>& flags) {
  auto cmd = launch_command(cfg, config_path, n, flags);
  if (network != nullptr) {
    auto prefix = network->exec_prefix(n);
    cmd.insert(cmd.begin(), prefix.begin(), prefix.end());
  }
  return bench::child_process::spawn(cmd.front(), {cmd.begin() + 1, cmd.end()}, log);
}

// Waits for its ready line, then copies what it prints after into its log as it comes.
caf::error await_ready(node_process& x, std::chrono::milliseconds timeout) {
  auto line = x.process.read_line(timeout);
  if (!line || line->rfind("crescent-node ", 0) != 0)
    return make_error(errc::unavailable,
                      "node " + std::to_string(x.node) + " did not start (" +
                          (line ? "it printed: " + *line : crescent::describe(line.error())) +
                          "; see " + x.log_path + ")");
  std::ofstream{x.log_path, std::ios::app} << *line << "\n";
  return caf::none;
}

} // namespace

void copy_node_output(node_process& x) {
  x.output = std::make_unique<std::thread>([&process = x.process, path = x.log_path] {
    std::ofstream log{path, std::ios::app};
    // Until the node closes its output: it exits, or is killed.
    for (;;) {
      auto line = process.read_line(std::chrono::hours(24));
      if (!line)
        return;
      log << *line << "\n" << std::flush;
    }
  });
}

caf::expected<std::vector<node_process>>
launch_nodes(const cluster_config& cfg, const std::string& config_path, const std::string& run_dir,
             std::chrono::milliseconds timeout, const netns_network* network,
             const std::vector<std::string>& flags) {
  std::vector<node_process> nodes;
  auto fail = [&](const std::string& what) {
    stop_nodes(nodes);
    return caf::expected<std::vector<node_process>>{make_error(errc::unavailable, what)};
  };
  // All start at once; then each is waited for.
  for (uint32_t n = 0; n < cfg.nodes.size(); ++n) {
    if (!cfg.nodes[n].hosted_elsewhere())
      continue;
    const std::string log = run_dir + "/node-" + std::to_string(n) + ".log";
    auto p = spawn_node(cfg, config_path, n, log, network, flags);
    if (!p)
      return fail("node " + std::to_string(n) + ": " + crescent::describe(p.error()));
    nodes.push_back({n, std::move(*p), log, false, false, nullptr});
  }
  for (auto& x : nodes)
    if (auto err = await_ready(x, timeout))
      return fail(crescent::describe(err));
  for (auto& x : nodes)
    copy_node_output(x);
  return nodes;
}

caf::expected<node_process>
launch_node_again(const cluster_config& cfg, const std::string& config_path,
                  const std::string& log_path, uint32_t node, std::chrono::milliseconds timeout,
                  const netns_network* network, const std::vector<std::string>& flags) {
  auto p = spawn_node(cfg, config_path, node, log_path, network, flags);
  if (!p)
    return make_error(errc::unavailable,
                      "node " + std::to_string(node) + ": " + crescent::describe(p.error()));
  node_process x{node, std::move(*p), log_path, false, false, nullptr};
  if (auto err = await_ready(x, timeout)) {
    x.process.kill();
    return err;
  }
  return x;
}

void stop_nodes(std::vector<node_process>& nodes) {
  for (auto& x : nodes) {
    if (x.paused)
      x.process.signal(SIGCONT);
    x.paused = false;
    x.process.close_input();
  }
  // The copiers end when their node closes its output; one that does not within its grace
  // period is killed, which closes it.
  for (auto& x : nodes)
    if (x.output) {
      for (int i = 0; i < 500 && x.process.running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (x.process.running())
        x.process.kill();
      x.output->join();
    }
  nodes.clear(); // each reaped
}

} // namespace crescent::up
