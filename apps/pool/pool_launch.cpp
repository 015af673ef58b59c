#include "apps/pool/pool_launch.hpp"

#include "messages/errors.hpp"

#include <cstdio>

namespace crescent::pool {

namespace {

std::vector<std::string> with_command(const char* command, const std::vector<std::string>& args) {
  std::vector<std::string> all{command};
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

} // namespace

caf::expected<launched_master> launch_master(const std::string& binary,
                                             const std::vector<std::string>& args,
                                             std::chrono::milliseconds timeout) {
  auto p = bench::child_process::spawn(binary, with_command("pool-master", args));
  if (!p)
    return std::move(p.error());
  auto line = p->read_line(timeout);
  if (!line)
    return std::move(line.error());
  unsigned port = 0;
  if (std::sscanf(line->c_str(), "crescent-pool-master port=%u", &port) != 1 || port == 0 ||
      port > 65535)
    return make_error(errc::io_error, "pool-master said: " + *line);
  return launched_master{std::move(*p), static_cast<uint16_t>(port)};
}

caf::expected<bench::child_process> launch_node(const std::string& binary,
                                                const std::vector<std::string>& args,
                                                std::chrono::milliseconds timeout) {
  auto p = bench::child_process::spawn(binary, with_command("pool-node", args));
  if (!p)
    return p;
  if (auto ready = p->read_line(timeout); !ready)
    return std::move(ready.error());
  return p;
}

} // namespace crescent::pool
