#include "apps/up/fault_plan.hpp"

#include "actors/cluster/yaml_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace crescent::up {

bool message_match::takes(std::string_view operation, std::string_view from_role,
                          std::string_view to_role, std::optional<int32_t> from_place,
                          std::optional<int32_t> to_place) const {
  if (!type.empty() && operation != type)
    return false;
  if (!from.empty() && from_role != from)
    return false;
  if (!to.empty() && to_role != to)
    return false;
  if (!node)
    return true;
  if (!from_place || !to_place)
    return false;
  if (peer)
    return (*from_place == *node && *to_place == *peer) ||
           (*from_place == *peer && *to_place == *node);
  return *from_place == *node || *to_place == *node;
}

const char* kind_name(fault_kind k) {
  switch (k) {
  case fault_kind::kill:
    return "kill";
  case fault_kind::pause:
    return "pause";
  case fault_kind::partition:
    return "partition";
  case fault_kind::drop:
    return "drop";
  case fault_kind::delay:
    return "delay";
  case fault_kind::duplicate:
    return "duplicate";
  case fault_kind::reorder:
    return "reorder";
  case fault_kind::fail_transfer:
    return "fail_transfer";
  case fault_kind::corrupt:
    return "corrupt";
  case fault_kind::delay_transfer:
    return "delay_transfer";
  }
  return "?";
}

namespace {

bool is_role(const std::string& s) {
  return std::any_of(std::begin(fault_roles), std::end(fault_roles),
                     [&](const char* r) { return s == r; });
}

// What one fault's fields said, before the checks that need them all.
struct seen_fields {
  bool at = false, for_ms = false, delay_ms = false, match = false, restart = false;
  int kinds = 0;
};

caf::error read_place(yaml_reader& r, const YAML::Node& v, const std::string& field,
                      std::optional<int32_t>& out, bool main_allowed) {
  if (main_allowed && v.IsScalar() && v.Scalar() == "main") {
    out = main_place;
    return caf::none;
  }
  uint32_t node = 0;
  if (auto err = r.read_uint(v, field, node, 0, cluster_nodes_max - 1))
    return err;
  out = static_cast<int32_t>(node);
  return caf::none;
}

caf::error read_nodes(yaml_reader& r, const YAML::Node& v, const std::string& field,
                      std::vector<uint32_t>& out) {
  if (!v.IsSequence() || v.size() == 0)
    return r.error_at(v, field, "expected a list of nodes, such as [1, 2]");
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t node = 0;
    if (auto err = r.read_uint(v[i], field + "[" + std::to_string(i) + "]", node, 0,
                               cluster_nodes_max - 1))
      return err;
    if (std::find(out.begin(), out.end(), node) != out.end())
      return r.error_at(v[i], field, "node " + std::to_string(node) + " is named twice");
    out.push_back(node);
  }
  return caf::none;
}

caf::error read_probability(yaml_reader& r, const YAML::Node& v, const std::string& field,
                            double& p) {
  if (auto err = r.read_double(v, field, p))
    return err;
  if (!(p > 0 && p <= 1))
    return r.error_at(v, field, "a probability in (0, 1], got " + v.Scalar());
  return caf::none;
}

std::map<std::string, yaml_reader::handler> fault_handlers(yaml_reader& r, fault& f,
                                                           seen_fields& seen) {
  auto node_kind = [&](fault_kind k) {
    return [&r, &f, &seen, k](const YAML::Node& v, const std::string& field) {
      f.kind = k;
      ++seen.kinds;
      return r.read_uint(v, field, f.node, 0, cluster_nodes_max - 1);
    };
  };
  auto message_kind = [&](fault_kind k) {
    return [&r, &f, &seen, k](const YAML::Node& v, const std::string& field) {
      f.kind = k;
      ++seen.kinds;
      return read_probability(r, v, field, f.probability);
    };
  };
  auto role = [&](std::string& out) {
    return [&r, &seen, &out](const YAML::Node& v, const std::string& field) {
      seen.match = true;
      if (auto err = r.read_string(v, field, out))
        return err;
      if (!is_role(out))
        return r.error_at(v, field,
                          "'" + out +
                              "' is not a role: conductor, store_master, request, block_owner, "
                              "node_agent, prefill, decode or coupled");
      return caf::error{};
    };
  };
  std::map<std::string, yaml_reader::handler> h{
      {"at_ms",
       [&](auto& v, auto& field) {
         seen.at = true;
         return r.read_uint(v, field, f.at_ms, 0, fault_time_ms_max);
       }},
      {"for_ms",
       [&](auto& v, auto& field) {
         seen.for_ms = true;
         return r.read_uint(v, field, f.for_ms, 1, fault_time_ms_max);
       }},
      {"restart_after_ms",
       [&](auto& v, auto& field) {
         seen.restart = true;
         return r.read_uint(v, field, f.restart_after_ms, 1, fault_time_ms_max);
       }},
      {"delay_ms",
       [&](auto& v, auto& field) {
         seen.delay_ms = true;
         return r.read_uint(v, field, f.delay_ms, 1, fault_delay_ms_max);
       }},
      {"kill", node_kind(fault_kind::kill)},
      {"pause", node_kind(fault_kind::pause)},
      {"partition",
       [&](auto& v, auto& field) {
         f.kind = fault_kind::partition;
         ++seen.kinds;
         return read_nodes(r, v, field, f.nodes);
       }},
      {"drop", message_kind(fault_kind::drop)},
      {"delay", message_kind(fault_kind::delay)},
      {"duplicate", message_kind(fault_kind::duplicate)},
      {"reorder", message_kind(fault_kind::reorder)},
      {"fail_transfer", message_kind(fault_kind::fail_transfer)},
      {"corrupt", message_kind(fault_kind::corrupt)},
      {"delay_transfer", message_kind(fault_kind::delay_transfer)},
      {"type",
       [&](auto& v, auto& field) {
         seen.match = true;
         return r.read_string(v, field, f.match.type);
       }},
      {"from", role(f.match.from)},
      {"to", role(f.match.to)},
      {"node",
       [&](auto& v, auto& field) {
         seen.match = true;
         return read_place(r, v, field, f.match.node, false);
       }},
      {"peer", [&](auto& v, auto& field) {
         seen.match = true;
         return read_place(r, v, field, f.match.peer, true);
       }}};
  return h;
}

caf::error read_fault(yaml_reader& r, const YAML::Node& n, size_t index, fault& f) {
  const std::string name = "faults[" + std::to_string(index) + "]";
  seen_fields seen;
  f.line = n.Mark().line + 1;
  if (auto err = r.visit(n, name, fault_handlers(r, f, seen)))
    return err;
  if (seen.kinds != 1)
    return r.error_at(n, name,
                      "needs exactly one of kill, pause, partition, drop, delay, duplicate, "
                      "reorder, fail_transfer, corrupt or delay_transfer");
  if (!seen.at)
    return r.error_at(n, name, "needs at_ms, when it happens");
  const char* kind = kind_name(f.kind);
  const bool lasting = f.kind == fault_kind::pause || f.kind == fault_kind::partition;
  if (lasting && !seen.for_ms)
    return r.error_at(n, name, fmt::format("a {} needs for_ms, how long", kind));
  if (f.kind == fault_kind::kill && seen.for_ms)
    return r.error_at(n, name,
                      "a kill lasts: for_ms does not apply to it (restart_after_ms starts a new "
                      "process)");
  if (f.kind != fault_kind::kill && seen.restart)
    return r.error_at(n, name, "restart_after_ms applies to a kill only");
  const bool held = f.kind == fault_kind::delay || f.kind == fault_kind::reorder ||
                    f.kind == fault_kind::delay_transfer;
  if (held && !seen.delay_ms)
    return r.error_at(n, name,
                      fmt::format("a {} needs delay_ms, how long a {} is held", kind,
                                  f.is_transfer_fault() ? "KV slice" : "message"));
  // A duplicate's copy may come late (a copy sent again after a lost acknowledgement does):
  // delay_ms is optional there, the copy's lateness.
  if (!held && f.kind != fault_kind::duplicate && seen.delay_ms)
    return r.error_at(n, name,
                      "delay_ms applies to delay, reorder, duplicate and delay_transfer only");
  const bool message_fields = !f.match.type.empty() || !f.match.from.empty() ||
                              !f.match.to.empty() || f.match.peer.has_value();
  if (f.is_transfer_fault() && message_fields)
    return r.error_at(n, name,
                      fmt::format("a {} takes KV slices, chosen by node only: type, from, to and "
                                  "peer choose messages",
                                  kind));
  if (!f.is_message_fault() && !f.is_transfer_fault() && seen.match)
    return r.error_at(n, name,
                      fmt::format("type, from, to, node and peer choose messages: a {} takes "
                                  "none",
                                  kind));
  if (f.match.peer && !f.match.node)
    return r.error_at(n, name, "peer needs node, the other end");
  if (f.match.peer && *f.match.peer == *f.match.node)
    return r.error_at(n, name, "node and peer are the same place: no message crosses it");
  return caf::none;
}

caf::error read_faults(yaml_reader& r, const YAML::Node& v, const std::string& field,
                       fault_plan& plan) {
  if (!v.IsSequence())
    return r.error_at(v, field, "expected a list of faults");
  if (v.size() > faults_max)
    return r.error_at(v, field, "at most 1024 faults");
  for (size_t i = 0; i < v.size(); ++i) {
    fault f;
    if (auto e = read_fault(r, v[i], i, f))
      return e;
    plan.faults.push_back(f);
  }
  return caf::none;
}

} // namespace

caf::expected<fault_plan> parse_fault_plan(const std::string& yaml_text,
                                           const std::string& source) {
  auto parsed = load_yaml(yaml_text, source);
  if (!parsed)
    return std::move(parsed.error());
  const YAML::Node root = std::move(*parsed);
  yaml_reader r{source};
  fault_plan plan;
  if (root.IsNull())
    return plan; // an empty plan breaks nothing
  try {
    auto err = r.visit(root, "", {{"faults", [&](const YAML::Node& v, const std::string& field) {
                                     return read_faults(r, v, field, plan);
                                   }}});
    if (err)
      return err;
  } catch (const YAML::Exception& ex) {
    return make_error(errc::bad_config,
                      source + ":" + std::to_string(ex.mark.line + 1) + ": " + ex.msg);
  }
  std::stable_sort(plan.faults.begin(), plan.faults.end(),
                   [](const fault& a, const fault& b) { return a.at_ms < b.at_ms; });
  return plan;
}

caf::expected<fault_plan> load_fault_plan(const std::string& path) {
  auto text = read_config_text(path, "fault plan");
  if (!text)
    return std::move(text.error());
  return parse_fault_plan(*text, path);
}

namespace {

caf::error check_nodes_exist(const fault& f, const cluster_config& cfg, const std::string& where) {
  std::vector<int64_t> named;
  if (f.kind == fault_kind::kill || f.kind == fault_kind::pause)
    named.push_back(f.node);
  for (auto n : f.nodes)
    named.push_back(n);
  if (f.match.node)
    named.push_back(*f.match.node);
  if (f.match.peer && *f.match.peer != main_place)
    named.push_back(*f.match.peer);
  for (auto n : named)
    if (n >= static_cast<int64_t>(cfg.nodes.size()))
      return make_error(errc::bad_config, where + "node " + std::to_string(n) +
                                              " is not in the cluster (" +
                                              std::to_string(cfg.nodes.size()) + " nodes)");
  if (f.kind == fault_kind::partition && f.nodes.size() >= cfg.nodes.size())
    return make_error(errc::bad_config,
                      where + "a partition must leave some node on the other side");
  return caf::none;
}

// A node is not killed twice, nor paused after it was killed or while it is paused (a process
// started again after a kill included).
class node_timeline {
 public:
  caf::error add(const fault& f, const std::string& where) {
    if (f.kind != fault_kind::kill && f.kind != fault_kind::pause)
      return caf::none;
    if (killed_at_.count(f.node) != 0)
      return make_error(errc::bad_config, where + "node " + std::to_string(f.node) +
                                              " was killed at " +
                                              std::to_string(killed_at_[f.node]) + " ms");
    if (auto p = paused_until_.find(f.node); p != paused_until_.end() && f.at_ms < p->second)
      return make_error(errc::bad_config, where + "node " + std::to_string(f.node) +
                                              " is paused until " + std::to_string(p->second) +
                                              " ms");
    if (f.kind == fault_kind::kill)
      killed_at_[f.node] = f.at_ms;
    else
      paused_until_[f.node] = f.at_ms + f.for_ms;
    return caf::none;
  }

 private:
  std::map<uint32_t, uint64_t> killed_at_, paused_until_;
};

} // namespace

namespace {

// Why node `n` cannot be named by a real-time fault: it has no process (or namespace) of its own.
caf::error check_hosted(int64_t n, const cluster_config& cfg, const std::string& where,
                        const char* what) {
  if (n == main_place || cfg.nodes[static_cast<size_t>(n)].hosted_elsewhere())
    return caf::none;
  return make_error(errc::bad_config, where + "node " + std::to_string(n) +
                                          " runs in the cluster's main process: only nodes with "
                                          "an address, in processes of their own, can be " +
                                          what);
}

// The node and peer a real message fault names: each runs in a process of its own (or, as a
// peer, is the main process).
caf::error check_ends_hosted(const message_match& m, const cluster_config& cfg,
                             const std::string& where) {
  if (m.node)
    if (auto err = check_hosted(*m.node, cfg, where, "faulted"))
      return err;
  if (m.peer)
    return check_hosted(*m.peer, cfg, where, "faulted (name the main process: peer: main)");
  return caf::none;
}

// A fault `crescent up` carries out on packets (--netns): partitions and drops, chosen by node
// and peer only.
caf::error check_network_fault(const fault& f, const cluster_config& cfg, bool netns,
                               const std::string& where) {
  if (!netns)
    return make_error(errc::bad_config,
                      where + "'" + kind_name(f.kind) +
                          "' faults need crescent up --netns (node processes in network "
                          "namespaces of their own, as root), or simulated time (crescent "
                          "replay --sim --faults, crescent chaos)");
  for (auto n : f.nodes)
    if (auto err = check_hosted(n, cfg, where, "cut off"))
      return err;
  if (f.kind == fault_kind::partition)
    return caf::none;
  const auto& m = f.match;
  if (!m.type.empty() || !m.from.empty() || !m.to.empty())
    return make_error(errc::bad_config,
                      where + "crescent up --netns drops packets, which carry no message type or "
                              "role: choose them by node and peer only (type, from and to work "
                              "in simulated time)");
  if (auto err = check_ends_hosted(m, cfg, where))
    return err;
  return caf::none;
}

// A message fault `crescent up` carries out in its message gates (message_gate.hpp): whole CAF
// messages between processes, chosen as in simulated time.
caf::error check_gate_fault(const fault& f, const cluster_config& cfg, const std::string& where) {
  // Messages between actors of the main process cross no gate.
  const auto& m = f.match;
  if (auto err = check_ends_hosted(m, cfg, where))
    return err;
  if (!spans_processes(cfg))
    return make_error(errc::bad_config,
                      where + "no node runs in a process of its own: there are no messages "
                              "between processes to fault");
  return caf::none;
}

// The processes take a transfer fault through flags at their start and a signal when it
// begins and ends (transfer_faults.hpp): a launcher must pass the flags on.
caf::error check_transfer_fault(const cluster_config& cfg, const std::string& where,
                                size_t ordinal) {
  if (ordinal > transfer_faults_max)
    return make_error(errc::bad_config, where + "more than " + std::to_string(transfer_faults_max) +
                                            " transfer faults in one plan");
  if (!cfg.launcher.empty() && cfg.launcher.find("{faults}") == std::string::npos)
    return make_error(errc::bad_config,
                      where + "transfer faults reach node processes through flags their launcher "
                              "must pass on: add {faults} to the cluster file's launcher (after "
                              "'node --config {config} --node {node}')");
  return caf::none;
}

} // namespace

caf::error check_fault_plan(const fault_plan& plan, const cluster_config& cfg,
                            const std::string& source, bool netns) {
  node_timeline timeline;
  size_t transfer_faults = 0;
  for (const auto& f : plan.faults) {
    const std::string where = source + ":" + std::to_string(f.line) + ": ";
    if (auto err = check_nodes_exist(f, cfg, where))
      return err;
    switch (f.kind) {
    case fault_kind::kill:
    case fault_kind::pause:
      if (auto err = check_hosted(f.node, cfg, where, "killed or paused"))
        return err;
      if (f.restart_after_ms != 0 && cfg.rejoin_interval_ms == 0)
        return make_error(errc::bad_config,
                          where + "restart_after_ms: the new process would never rejoin, since "
                                  "the cluster file's rejoin_interval_ms is 0");
      break;
    case fault_kind::partition:
      if (auto err = check_network_fault(f, cfg, netns, where))
        return err;
      break;
    case fault_kind::drop:
      if (auto err =
              netns ? check_network_fault(f, cfg, netns, where) : check_gate_fault(f, cfg, where))
        return err;
      break;
    case fault_kind::delay:
    case fault_kind::duplicate:
    case fault_kind::reorder:
      if (auto err = check_gate_fault(f, cfg, where))
        return err;
      break;
    case fault_kind::fail_transfer:
    case fault_kind::corrupt:
    case fault_kind::delay_transfer:
      if (auto err = check_transfer_fault(cfg, where, ++transfer_faults))
        return err;
      break;
    }
    if (auto err = timeline.add(f, where))
      return err;
  }
  return caf::none;
}

caf::error check_sim_fault_plan(const fault_plan& plan, const cluster_config& cfg,
                                const std::string& source) {
  node_timeline timeline;
  for (const auto& f : plan.faults) {
    const std::string where = source + ":" + std::to_string(f.line) + ": ";
    if (auto err = check_nodes_exist(f, cfg, where))
      return err;
    if (auto err = timeline.add(f, where))
      return err;
  }
  return caf::none;
}

namespace {

std::string place_name(int32_t p) {
  return p == main_place ? std::string{"the main process"} : "node " + std::to_string(p);
}

std::string describe_match(const message_match& m) {
  std::string out = m.type.empty() ? "messages" : "'" + m.type + "' messages";
  if (!m.from.empty())
    out += " from " + m.from;
  if (!m.to.empty())
    out += " to " + m.to;
  if (m.node && m.peer)
    out += " between " + place_name(*m.node) + " and " + place_name(*m.peer);
  else if (m.node)
    out += " to or from " + place_name(*m.node);
  return out;
}

std::string list_nodes(const std::vector<uint32_t>& nodes) {
  return fmt::format("{}", fmt::join(nodes, ", "));
}

} // namespace

std::string describe(const fault& f) {
  const std::string during = f.for_ms == 0 ? "" : fmt::format(" for {} ms", f.for_ms);
  const std::string share = fmt::format("{:g}%", f.probability * 100);
  switch (f.kind) {
  case fault_kind::kill:
    return "kill node " + std::to_string(f.node) +
           (f.restart_after_ms == 0
                ? std::string{}
                : fmt::format(", start it again {} ms later", f.restart_after_ms));
  case fault_kind::pause:
    return "pause node " + std::to_string(f.node) + during;
  case fault_kind::partition:
    return "cut node" + std::string{f.nodes.size() > 1 ? "s " : " "} + list_nodes(f.nodes) +
           " from the others" + during;
  case fault_kind::drop:
    return "drop " + share + " of " + describe_match(f.match) + during;
  case fault_kind::delay:
    return fmt::format("delay {} of {} by {} ms{}", share, describe_match(f.match), f.delay_ms,
                       during);
  case fault_kind::duplicate:
    return "duplicate " + share + " of " + describe_match(f.match) +
           (f.delay_ms > 0 ? fmt::format(" (the copy {} ms late)", f.delay_ms) : "") + during;
  case fault_kind::reorder:
    return fmt::format("reorder {} of {} (held up to {} ms){}", share, describe_match(f.match),
                       f.delay_ms, during);
  case fault_kind::fail_transfer:
  case fault_kind::corrupt:
  case fault_kind::delay_transfer: {
    const std::string where =
        f.match.node ? " to or from node " + std::to_string(*f.match.node) : std::string{};
    const std::string by =
        f.kind == fault_kind::delay_transfer ? fmt::format(" by {} ms", f.delay_ms) : "";
    const char* verb = f.kind == fault_kind::corrupt          ? "corrupt"
                       : f.kind == fault_kind::delay_transfer ? "delay"
                                                              : "fail";
    return fmt::format("{} {} of KV slices{}{}{}", verb, share, where, by, during);
  }
  }
  return "?";
}

std::string format_fault_plan(const fault_plan& plan) {
  std::string out = "faults:\n";
  if (plan.faults.empty())
    return "faults: []\n";
  for (const auto& f : plan.faults) {
    out += fmt::format("  - {{at_ms: {}, ", f.at_ms);
    switch (f.kind) {
    case fault_kind::kill:
    case fault_kind::pause:
      out += fmt::format("{}: {}", kind_name(f.kind), f.node);
      break;
    case fault_kind::partition:
      out += "partition: [" + list_nodes(f.nodes) + "]";
      break;
    default:
      // Shortest text that reads back as the same double.
      out += fmt::format("{}: {}", kind_name(f.kind), f.probability);
    }
    if (f.for_ms != 0)
      out += fmt::format(", for_ms: {}", f.for_ms);
    if (f.restart_after_ms != 0)
      out += fmt::format(", restart_after_ms: {}", f.restart_after_ms);
    if (f.delay_ms != 0)
      out += fmt::format(", delay_ms: {}", f.delay_ms);
    const auto& m = f.match;
    if (!m.type.empty())
      out += ", type: " + m.type;
    if (!m.from.empty())
      out += ", from: " + m.from;
    if (!m.to.empty())
      out += ", to: " + m.to;
    if (m.node)
      out += fmt::format(", node: {}", *m.node);
    if (m.peer)
      out += *m.peer == main_place ? ", peer: main" : fmt::format(", peer: {}", *m.peer);
    out += "}\n";
  }
  return out;
}

} // namespace crescent::up
