#include "apps/up/fault_plan.hpp"

#include "actors/cluster/yaml_reader.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace crescent::up {

namespace {

// Kinds a plan may name that this build cannot inject yet: refused with that reason, not taken
// for typos.
constexpr const char* not_built[] = {"partition", "drop",    "delay",
                                     "duplicate", "reorder", "corrupt"};

caf::error read_fault(yaml_reader& r, const YAML::Node& n, size_t index, fault& f) {
  const std::string name = "faults[" + std::to_string(index) + "]";
  bool have_at = false, have_for = false;
  int kinds = 0;
  f.line = n.Mark().line + 1;
  auto kind = [&](fault_kind k) {
    return [&r, &f, &kinds, k](const YAML::Node& v, const std::string& field) {
      f.kind = k;
      ++kinds;
      return r.read_uint(v, field, f.node, 0, cluster_nodes_max - 1);
    };
  };
  std::map<std::string, yaml_reader::handler> handlers{
      {"at_ms",
       [&](auto& v, auto& field) {
         have_at = true;
         return r.read_uint(v, field, f.at_ms, 0, fault_time_ms_max);
       }},
      {"for_ms",
       [&](auto& v, auto& field) {
         have_for = true;
         return r.read_uint(v, field, f.for_ms, 1, fault_time_ms_max);
       }},
      {"kill", kind(fault_kind::kill)},
      {"pause", kind(fault_kind::pause)}};
  for (const char* k : not_built)
    handlers.emplace(k, [&r, k](const YAML::Node& v, const std::string& field) {
      return r.error_at(v, field,
                        std::string{"'"} + k +
                            "' faults are not built yet (this build injects kill and pause)");
    });
  if (auto err = r.visit(n, name, handlers))
    return err;
  if (kinds != 1)
    return r.error_at(n, name, "needs exactly one of kill: NODE or pause: NODE");
  if (!have_at)
    return r.error_at(n, name, "needs at_ms, when it happens");
  if (f.kind == fault_kind::pause && !have_for)
    return r.error_at(n, name, "a pause needs for_ms, how long");
  if (f.kind == fault_kind::kill && have_for)
    return r.error_at(n, name, "a kill lasts: for_ms applies to pauses only");
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
                                     return caf::error{};
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
  std::ifstream in{path};
  if (!in)
    return make_error(errc::bad_config, "cannot read fault plan " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_fault_plan(text.str(), path);
}

caf::error check_fault_plan(const fault_plan& plan, const cluster_config& cfg,
                            const std::string& source) {
  std::map<uint32_t, uint64_t> killed_at, paused_until;
  for (const auto& f : plan.faults) {
    const std::string where = source + ":" + std::to_string(f.line) + ": ";
    if (f.node >= cfg.nodes.size())
      return make_error(errc::bad_config, where + "node " + std::to_string(f.node) +
                                              " is not in the cluster (" +
                                              std::to_string(cfg.nodes.size()) + " nodes)");
    if (!cfg.nodes[f.node].hosted_elsewhere())
      return make_error(errc::bad_config,
                        where + "node " + std::to_string(f.node) +
                            " runs in the cluster's main process: only nodes with an address, "
                            "in processes of their own, can be killed or paused");
    if (killed_at.count(f.node) != 0)
      return make_error(errc::bad_config, where + "node " + std::to_string(f.node) +
                                              " was killed at " +
                                              std::to_string(killed_at[f.node]) + " ms");
    if (auto p = paused_until.find(f.node); p != paused_until.end() && f.at_ms < p->second)
      return make_error(errc::bad_config, where + "node " + std::to_string(f.node) +
                                              " is paused until " + std::to_string(p->second) +
                                              " ms");
    if (f.kind == fault_kind::kill)
      killed_at[f.node] = f.at_ms;
    else
      paused_until[f.node] = f.at_ms + f.for_ms;
  }
  return caf::none;
}

std::string describe(const fault& f) {
  if (f.kind == fault_kind::kill)
    return "kill node " + std::to_string(f.node);
  return "pause node " + std::to_string(f.node) + " for " + std::to_string(f.for_ms) + " ms";
}

} // namespace crescent::up
