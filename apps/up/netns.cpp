#include "apps/up/netns.hpp"

#include "apps/bench/child_process.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace crescent::up {

namespace {

constexpr auto command_timeout = std::chrono::seconds(10);
constexpr uint32_t share_scale = 1'000'000; // a drop's probability, in millionths

std::string read_all(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  auto text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

// Where `program` is: on PATH, or in the system directories where Debian puts ip and nft
// (a PATH without them is common for a user's shell).
std::string find_program(const std::string& program) {
  std::string dirs = getenv("PATH") != nullptr ? getenv("PATH") : "";
  dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream list{dirs};
  for (std::string dir; std::getline(list, dir, ':');)
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0)
      return dir + "/" + program;
  return program;
}

// Runs `args` (a program and its arguments) to its end; an error quotes what it printed.
caf::error run(const std::vector<std::string>& args, const std::string& err_path) {
  std::filesystem::remove(err_path);
  auto p = bench::child_process::spawn(find_program(args.front()), {args.begin() + 1, args.end()},
                                       err_path);
  if (!p)
    return make_error(errc::unavailable, args.front() + ": " + crescent::describe(p.error()));
  auto status = p->wait_exit(command_timeout);
  if (!status)
    return make_error(errc::unavailable, args.front() + ": " + crescent::describe(status.error()));
  if (*status != 0) {
    std::string line;
    for (const auto& a : args)
      line += (line.empty() ? "" : " ") + a;
    return make_error(errc::unavailable,
                      fmt::format("'{}' failed ({}): {}", line, *status, read_all(err_path)));
  }
  return caf::none;
}

std::string bridge_name(int pid) {
  return "crbr" + std::to_string(pid % 100000);
}

std::string veth_name(int pid, uint32_t node) {
  return "crv" + std::to_string(pid % 100000) + "n" + std::to_string(node);
}

std::string namespace_name(int pid, uint32_t node) {
  return "crescent-" + std::to_string(pid) + "-n" + std::to_string(node);
}

// 10.213.<s>.0/24 with s from the process id, moved on past any that an address of this host
// is in already (another run's bridge, or a network of the host's own).
caf::expected<uint32_t> free_subnet(int pid) {
  auto p = bench::child_process::spawn(find_program("ip"), {"-o", "-4", "addr", "show"});
  if (!p)
    return std::move(p.error());
  std::string taken;
  for (;;) {
    auto line = p->read_line(command_timeout);
    if (!line)
      break;
    taken += *line + "\n";
  }
  [[maybe_unused]] auto status = p->wait_exit(command_timeout);
  for (uint32_t i = 0; i < 250; ++i) {
    const uint32_t s = 1 + (static_cast<uint32_t>(pid) + i) % 250;
    if (taken.find(fmt::format(" 10.213.{}.", s)) == std::string::npos)
      return s;
  }
  return make_error(errc::unavailable, "every subnet 10.213.1-250.0/24 is in use here");
}

std::string table_name(size_t id) {
  return "crescent_f" + std::to_string(id);
}

} // namespace

// Tries what a run does: a namespace, nftables in it, and its removal (a container without the
// capability, or a kernel without nf_tables, fails here rather than mid-run).
caf::error netns_network::available() {
  if (geteuid() != 0)
    return make_error(errc::unavailable, "--netns needs root (to make network namespaces)");
  const std::string err = std::filesystem::temp_directory_path().string() + "/crescent-netns-" +
                          std::to_string(getpid()) + ".err";
  const std::string probe = "crescent-probe-" + std::to_string(getpid());
  const std::vector<std::vector<std::string>> steps{
      {"ip", "-V"},
      {"nft", "--version"},
      {"tc", "-V"},
      {"ip", "netns", "add", probe},
      {"ip", "netns", "exec", probe, "nft", "add", "table", "inet", "crescent_probe"}};
  caf::error failed;
  for (const auto& step : steps)
    if (failed = run(step, err); failed)
      break;
  [[maybe_unused]] auto gone = run({"ip", "netns", "del", probe}, err);
  std::filesystem::remove(err);
  if (failed)
    return make_error(errc::unavailable,
                      "--netns needs iproute2, nftables and the right to make network "
                      "namespaces: " +
                          crescent::describe(failed));
  return caf::none;
}

namespace {

// The arguments of `tc` that limit `dev` to `link_mbit` Mbit/s. The bucket holds at least 256
// KiB, more than one packet of any device here (a bucket smaller than a packet drops every such
// packet, and TCP stalls instead of slowing), and at least 1 ms of the rate; the queue holds 400
// ms of it before the kernel drops (and TCP sends again).
std::vector<std::string> link_limit(const std::string& dev, uint32_t link_mbit) {
  const uint64_t bytes_per_ms = uint64_t{link_mbit} * 1000 / 8;
  const uint64_t burst_bytes = std::max<uint64_t>(256 * 1024, bytes_per_ms);
  const auto rate = fmt::format("{}mbit", link_mbit);
  const auto burst = std::to_string(burst_bytes);
  std::vector<std::string> args{"tc", "qdisc", "replace", "dev", dev, "root", "tbf"};
  args.insert(args.end(), {"rate", rate, "burst", burst, "latency", "400ms"});
  return args;
}

} // namespace

caf::expected<std::unique_ptr<netns_network>>
netns_network::create(const std::vector<uint32_t>& nodes, const std::string& work_dir,
                      uint32_t link_mbit) {
  for (auto n : nodes)
    if (n >= netns_nodes_max)
      return make_error(errc::bad_config, fmt::format("--netns places nodes 0 to {} only; node {}",
                                                      netns_nodes_max - 1, n));
  if (link_mbit > link_mbit_max)
    return make_error(errc::bad_config, fmt::format("a link of {} Mbit/s is over the limit of {}",
                                                    link_mbit, link_mbit_max));
  std::unique_ptr<netns_network> net{new netns_network};
  net->pid_ = getpid();
  auto subnet = free_subnet(net->pid_);
  if (!subnet)
    return std::move(subnet.error());
  net->subnet_ = *subnet;
  net->main_host_ = fmt::format("10.213.{}.1", net->subnet_);
  net->work_dir_ = work_dir;
  const std::string err = work_dir + "/netns.err";
  const auto bridge = bridge_name(net->pid_);
  // The destructor removes what exists of it if a step fails.
  auto step = [&](std::vector<std::string> args) { return run(args, err); };
  if (auto e = step({"ip", "link", "add", bridge, "type", "bridge"}))
    return e;
  net->nodes_ = nodes; // from here on the destructor removes them
  if (auto e = step({"ip", "addr", "add", net->main_host_ + "/24", "dev", bridge}))
    return e;
  if (auto e = step({"ip", "link", "set", bridge, "up"}))
    return e;
  for (auto n : nodes) {
    const auto ns = net->namespace_of(n);
    const auto veth = net->bridge_end_of(n);
    auto in_ns = [&](std::vector<std::string> args) {
      args.insert(args.begin(), {"ip", "netns", "exec", ns});
      return step(args);
    };
    if (auto e = step({"ip", "netns", "add", ns}))
      return e;
    if (auto e =
            step({"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns}))
      return e;
    if (auto e = step({"ip", "link", "set", veth, "master", bridge, "up"}))
      return e;
    if (auto e = in_ns({"ip", "addr", "add", net->host_of(n) + "/24", "dev", "eth0"}))
      return e;
    if (auto e = in_ns({"ip", "link", "set", "eth0", "up"}))
      return e;
    if (auto e = in_ns({"ip", "link", "set", "lo", "up"}))
      return e;
    if (link_mbit == 0)
      continue;
    // The bridge's end sends what the node receives; the namespace's end what it sends.
    if (auto e = step(link_limit(veth, link_mbit)))
      return e;
    if (auto e = in_ns(link_limit("eth0", link_mbit)))
      return e;
  }
  return net;
}

netns_network::~netns_network() {
  if (pid_ != 0)
    remove_all(pid_, nodes_);
}

void netns_network::remove_all(int pid, const std::vector<uint32_t>& nodes) {
  const std::string err = std::filesystem::temp_directory_path().string() + "/crescent-netns-" +
                          std::to_string(pid) + "-cleanup.err";
  // Deleting a namespace deletes its veth end, and with it the bridge's.
  for (auto n : nodes)
    [[maybe_unused]] auto e = run({"ip", "netns", "del", namespace_name(pid, n)}, err);
  [[maybe_unused]] auto e = run({"ip", "link", "del", bridge_name(pid)}, err);
  std::filesystem::remove(err);
}

std::string netns_network::namespace_of(uint32_t node) const {
  return namespace_name(pid_, node);
}

std::string netns_network::bridge_end_of(uint32_t node) const {
  return veth_name(pid_, node);
}

std::string netns_network::host_of(uint32_t node) const {
  return fmt::format("10.213.{}.{}", subnet_, 10 + node);
}

std::vector<std::string> netns_network::exec_prefix(uint32_t node) const {
  return {find_program("ip"), "netns", "exec", namespace_of(node)};
}

caf::expected<std::map<uint32_t, std::string>> netns_network::rules_of(const fault& f) const {
  auto has = [&](uint32_t n) { return std::find(nodes_.begin(), nodes_.end(), n) != nodes_.end(); };
  auto absent = [&](int64_t n) {
    return make_error(errc::bad_config,
                      fmt::format("node {} has no namespace: only nodes with an address run in "
                                  "namespaces of their own",
                                  n));
  };
  const std::string subnet = fmt::format("10.213.{}.0/24", subnet_);
  std::map<uint32_t, std::string> out;
  if (f.kind == fault_kind::partition) {
    std::string inside;
    for (auto n : f.nodes) {
      if (!has(n))
        return absent(n);
      inside += (inside.empty() ? "" : ", ") + host_of(n);
    }
    for (auto n : f.nodes)
      out[n] = fmt::format("ip daddr {} ip daddr != {{ {} }} drop|ip saddr {} ip saddr != {{ {} }} "
                           "drop",
                           subnet, inside, subnet, inside);
    return out;
  }
  if (f.kind != fault_kind::drop)
    return make_error(errc::bad_config, "'" + describe(f) + "': --netns drops packets only");
  const auto share = static_cast<uint32_t>(f.probability * share_scale);
  const std::string chance = fmt::format("numgen random mod {} < {} drop", share_scale, share);
  std::string other_out = "ip daddr " + subnet, other_in = "ip saddr " + subnet;
  if (f.match.peer) {
    if (*f.match.peer != main_place && !has(static_cast<uint32_t>(*f.match.peer)))
      return absent(*f.match.peer);
    const auto peer =
        *f.match.peer == main_place ? main_host_ : host_of(static_cast<uint32_t>(*f.match.peer));
    other_out = "ip daddr " + peer;
    other_in = "ip saddr " + peer;
  }
  std::vector<uint32_t> ends;
  if (f.match.node) {
    if (!has(static_cast<uint32_t>(*f.match.node)))
      return absent(*f.match.node);
    ends.push_back(static_cast<uint32_t>(*f.match.node));
  } else {
    for (auto n : nodes_)
      if (!f.match.peer || *f.match.peer != static_cast<int32_t>(n))
        ends.push_back(n);
  }
  for (auto n : ends)
    out[n] = other_out + " " + chance + "|" + other_in + " " + chance;
  return out;
}

caf::error netns_network::start_fault(size_t id, const fault& f) {
  auto rules = rules_of(f);
  if (!rules)
    return std::move(rules.error());
  const auto table = table_name(id);
  for (const auto& [node, both] : *rules) {
    const auto bar = both.find('|');
    const std::string path = fmt::format("{}/{}-n{}.nft", work_dir_, table, node);
    std::ofstream{path} << fmt::format(
        "table inet {} {{\n"
        "  chain out {{ type filter hook output priority 0; policy accept; {}; }}\n"
        "  chain in {{ type filter hook input priority 0; policy accept; {}; }}\n"
        "}}\n",
        table, both.substr(0, bar), both.substr(bar + 1));
    auto args = exec_prefix(node);
    args.insert(args.end(), {"nft", "-f", path});
    if (auto e = run(args, work_dir_ + "/netns.err"))
      return e;
    active_[id].push_back(node);
  }
  return caf::none;
}

caf::error netns_network::end_fault(size_t id, const fault&) {
  auto found = active_.find(id);
  if (found == active_.end())
    return caf::none;
  caf::error first;
  for (auto node : found->second) {
    auto args = exec_prefix(node);
    args.insert(args.end(), {"nft", "delete", "table", "inet", table_name(id)});
    if (auto e = run(args, work_dir_ + "/netns.err"); e && !first)
      first = std::move(e);
  }
  active_.erase(found);
  return first;
}

} // namespace crescent::up
