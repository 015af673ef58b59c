#include "apps/chaos/fault_budget.hpp"

#include "actors/cluster/yaml_reader.hpp"
#include "apps/sim/delivery_policy.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

namespace crescent::chaos {

namespace {

caf::error read_kinds(yaml_reader& r, const YAML::Node& v, const std::string& field,
                      std::vector<up::fault_kind>& out) {
  static const std::pair<const char*, up::fault_kind> names[] = {
      {"kill", up::fault_kind::kill},           {"pause", up::fault_kind::pause},
      {"partition", up::fault_kind::partition}, {"drop", up::fault_kind::drop},
      {"delay", up::fault_kind::delay},         {"duplicate", up::fault_kind::duplicate},
      {"reorder", up::fault_kind::reorder},     {"fail_transfer", up::fault_kind::fail_transfer},
      {"corrupt", up::fault_kind::corrupt},     {"delay_transfer", up::fault_kind::delay_transfer}};
  std::vector<std::string> given;
  if (auto err = r.read_strings(v, field, given, 16))
    return err;
  if (given.empty())
    return r.error_at(v, field, "name at least one kind");
  out.clear();
  for (const auto& g : given) {
    auto k = std::find_if(std::begin(names), std::end(names),
                          [&](const auto& n) { return g == n.first; });
    if (k == std::end(names))
      return r.error_at(v, field,
                        "'" + g +
                            "' is not a fault kind: kill, pause, partition, drop, delay, "
                            "duplicate, reorder, fail_transfer, corrupt or delay_transfer");
    if (std::find(out.begin(), out.end(), k->second) == out.end())
      out.push_back(k->second);
  }
  return caf::none;
}

caf::error read_budget(yaml_reader& r, const YAML::Node& v, const std::string& field,
                       fault_budget& b) {
  return r.visit(
      v, field,
      {{"faults_max",
        [&](auto& x, auto& f) { return r.read_uint(x, f, b.faults_max, 1, budget_faults_max); }},
       {"kinds", [&](auto& x, auto& f) { return read_kinds(r, x, f, b.kinds); }},
       {"probability_max",
        [&](auto& x, auto& f) {
          if (auto err = r.read_double(x, f, b.probability_max))
            return err;
          if (!(b.probability_max > 0 && b.probability_max <= 1))
            return r.error_at(x, f, "a probability in (0, 1], got " + x.Scalar());
          return caf::error{};
        }},
       {"delay_ms_max",
        [&](auto& x, auto& f) {
          return r.read_uint(x, f, b.delay_ms_max, 1, up::fault_delay_ms_max);
        }},
       {"late_copies", [&](auto& x, auto& f) { return r.read_bool(x, f, b.late_copies); }},
       {"for_ms_max",
        [&](auto& x, auto& f) {
          return r.read_uint(x, f, b.for_ms_max, 1, up::fault_time_ms_max);
        }},
       {"nodes_lost_max",
        [&](auto& x, auto& f) {
          return r.read_uint(x, f, b.nodes_lost_max, 0, cluster_nodes_max - 1);
        }},
       {"restart_ms_max", [&](auto& x, auto& f) {
          return r.read_uint(x, f, b.restart_ms_max, 0, up::fault_time_ms_max);
        }}});
}

} // namespace

caf::expected<fault_budget> parse_fault_budget(const std::string& yaml_text,
                                               const std::string& source) {
  auto parsed = load_yaml(yaml_text, source);
  if (!parsed)
    return std::move(parsed.error());
  yaml_reader r{source};
  fault_budget b;
  if (parsed->IsNull())
    return b;
  try {
    if (auto err = r.visit(*parsed, "",
                           {{"budget", [&](auto& v, auto& f) { return read_budget(r, v, f, b); }}}))
      return err;
  } catch (const YAML::Exception& ex) {
    return make_error(errc::bad_config,
                      source + ":" + std::to_string(ex.mark.line + 1) + ": " + ex.msg);
  }
  return b;
}

caf::expected<fault_budget> load_fault_budget(const std::string& path) {
  auto text = read_config_text(path, "fault budget");
  if (!text)
    return std::move(text.error());
  return parse_fault_budget(*text, path);
}

namespace {

// Draws from the seed's generator by hand: std::uniform_*_distribution differ between standard
// libraries, and a seed must name the same plan everywhere.
struct draw {
  std::mt19937_64 rng;
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng() % n; }
  uint64_t in(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  double unit() { return sim::uniform_unit(rng); }
};

void draw_match(draw& d, up::fault& f, uint32_t nodes) {
  switch (d.below(4)) {
  case 0: // one node's traffic
    f.match.node = int32_t(d.below(nodes));
    break;
  case 1: { // between a node and another place
    f.match.node = int32_t(d.below(nodes));
    int32_t peer = int32_t(d.below(nodes + 1)) - 1; // -1: the main process
    if (peer == *f.match.node)
      peer = up::main_place;
    f.match.peer = peer;
    break;
  }
  default: // everything that crosses
    break;
  }
}

up::fault draw_fault(draw& d, const fault_budget& b, uint32_t nodes, uint64_t span_ms,
                     up::fault_kind kind) {
  up::fault f;
  f.kind = kind;
  f.at_ms = d.in(0, span_ms);
  switch (kind) {
  case up::fault_kind::kill:
    f.node = uint32_t(d.below(nodes));
    if (b.restart_ms_max != 0 && d.below(2) == 0) // no draw at all without restarts
      f.restart_after_ms = d.in(1, b.restart_ms_max);
    break;
  case up::fault_kind::pause:
    f.node = uint32_t(d.below(nodes));
    f.for_ms = d.in(1, b.for_ms_max);
    break;
  case up::fault_kind::partition:
    f.nodes = {uint32_t(d.below(nodes))};
    f.for_ms = d.in(1, b.for_ms_max);
    break;
  default:
    // Rounded to 1e-4, so that the plan's YAML reads back the same.
    f.probability = std::max(1e-4, std::round(d.unit() * b.probability_max * 1e4) / 1e4);
    f.for_ms = d.in(1, b.for_ms_max);
    if (kind == up::fault_kind::delay || kind == up::fault_kind::reorder ||
        kind == up::fault_kind::delay_transfer)
      f.delay_ms = d.in(1, b.delay_ms_max);
    if (kind == up::fault_kind::duplicate && b.late_copies)
      f.delay_ms = d.in(0, b.delay_ms_max); // 0: at once
    if (f.is_transfer_fault()) {
      if (d.below(2) == 0)
        f.match.node = int32_t(d.below(nodes));
      break;
    }
    draw_match(d, f, nodes);
  }
  return f;
}

} // namespace

up::fault_plan draw_fault_plan(const fault_budget& b, const cluster_config& cfg, uint64_t seed,
                               uint64_t span_ms) {
  draw d{std::mt19937_64{seed}};
  const auto nodes = static_cast<uint32_t>(cfg.nodes.size());
  up::fault_plan plan;
  const uint64_t count = d.in(1, b.faults_max);
  uint32_t killed = 0;
  // A draw the plan's checks refuse (a second kill, a pause of a killed node) is drawn again, a
  // few times at most: a budget without room gives fewer faults.
  for (uint64_t i = 0, tries = 0; i < count && tries < 8 * count; ++tries) {
    const auto kind = b.kinds[d.below(b.kinds.size())];
    if (kind == up::fault_kind::kill && killed >= b.nodes_lost_max)
      continue;
    auto f = draw_fault(d, b, nodes, span_ms, kind);
    f.line = int(i) + 2; // as format_fault_plan writes it
    auto trial = plan;
    trial.faults.push_back(f);
    std::stable_sort(trial.faults.begin(), trial.faults.end(),
                     [](const up::fault& a, const up::fault& x) { return a.at_ms < x.at_ms; });
    if (up::check_sim_fault_plan(trial, cfg, "drawn"))
      continue;
    plan = std::move(trial);
    killed += kind == up::fault_kind::kill;
    ++i;
  }
  for (size_t i = 0; i < plan.faults.size(); ++i)
    plan.faults[i].line = int(i) + 2;
  return plan;
}

} // namespace crescent::chaos
