#include "apps/sim/fault_injector.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/cluster/node_spawn.hpp"

#include "apps/sim/sim_system.hpp"
#include "apps/up/transfer_faults.hpp"
#include "messages/errors.hpp"

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <random>

namespace crescent::sim {

using fault_atom = caf::atom_constant<caf::atom("fault")>;

struct fault_injector::state {
  up::fault_plan plan;
  std::vector<std::vector<caf::actor>> node_actors; // by node
  sim_system* sim = nullptr;
  cluster* cl = nullptr;
  int64_t start_ns = 0;
  std::mt19937_64 rng;
  std::vector<uint64_t> taken;
  std::vector<std::string> log;
  uint64_t unlisted = 0; // events past fault_log_lines_max

  void note(int64_t now_ns, const std::string& what) {
    if (log.size() >= fault_log_lines_max) {
      ++unlisted;
      return;
    }
    log.push_back(fmt::format("{:.3f} ms: {}", double(now_ns - start_ns) / 1e6, what));
  }

  double draw() { return uniform_unit(rng); }
};

namespace {

std::string_view role_of(std::string_view label) {
  return label.substr(0, label.find_first_of("/#"));
}

std::string_view operation_of(std::string_view type) {
  return type.substr(0, type.find('/'));
}

bool active(const up::fault& f, int64_t t_ns) {
  const int64_t at = int64_t(f.at_ms) * 1'000'000;
  return t_ns >= at && (f.for_ms == 0 || t_ns < at + int64_t(f.for_ms) * 1'000'000);
}

bool matches(const up::message_match& x, const ready_message& m) {
  return x.takes(operation_of(m.type), role_of(m.sender_name), role_of(m.receiver_name),
                 m.sender_place, m.receiver_place);
}

bool in(const std::vector<uint32_t>& nodes, int32_t place) {
  return place >= 0 && std::find(nodes.begin(), nodes.end(), uint32_t(place)) != nodes.end();
}

std::string describe_message(const ready_message& m) {
  return fmt::format("{} {} -> {}", m.type, m.sender_name, m.receiver_name);
}

// The actors of each node, as a kill finds them: its owner, its agent, its workers.
std::vector<std::vector<caf::actor>> actors_by_node(const directory& dir) {
  std::vector<std::vector<caf::actor>> out(dir.block_owners.size());
  for (uint32_t n = 0; n < out.size(); ++n) {
    out[n] = actors_on_node(dir, n);
    if (n < dir.node_agents.size() && dir.node_agents[n])
      out[n].insert(out[n].begin() + (dir.block_owners[n] ? 1 : 0),
                    caf::actor_cast<caf::actor>(dir.node_agents[n]));
  }
  return out;
}

// The end (ns on the simulation's clock) of the partitions that cut node `n` off at `now_ns`;
// nullopt where none does.
std::optional<int64_t> cut_off_until(const fault_injector::state& st, uint32_t n, int64_t now_ns) {
  std::optional<int64_t> until;
  for (const auto& f : st.plan.faults)
    if (f.kind == up::fault_kind::partition && active(f, now_ns - st.start_ns) &&
        in(f.nodes, int32_t(n)))
      until = std::max(until.value_or(0), st.start_ns + int64_t(f.at_ms + f.for_ms) * 1'000'000);
  return until;
}

// A start crosses to the node, where a message fault may lose it (or its answer): asked again
// until answered, at most start_tries times. Starting twice does no harm (an agent beats once,
// an owner reports again).
constexpr uint32_t start_tries = 8;
constexpr auto start_timeout = std::chrono::seconds(1);

void start_until_answered(caf::event_based_actor* self, fault_injector::state& st, caf::actor who,
                          uint32_t node, uint32_t tries_left) {
  self->request(who, start_timeout, start_atom::value)
      .then([] {},
            [=, st = &st](caf::error& err) {
              if (tries_left > 1)
                return start_until_answered(self, *st, who, node, tries_left - 1);
              st->note(st->sim->elapsed().count(),
                       fmt::format("node {}'s new actors did not answer {} starts: {}", node,
                                   start_tries, crescent::describe(err)));
            });
}

// A killed node's actors anew, as a process started again at its address would be: labelled,
// published, its agent handed to the conductor, and started. As in real time, where the main
// process takes a node back only once it answers, a node cut off by a partition is taken back
// when the partition ends.
void restart(caf::event_based_actor* self, fault_injector::state& st, uint32_t index) {
  const auto& f = st.plan.faults.at(index);
  const int64_t now = st.sim->elapsed().count();
  if (auto until = cut_off_until(st, f.node, now)) {
    st.note(now, fmt::format("node {} is cut off: started again when its partition ends", f.node));
    self->delayed_send(self, std::chrono::nanoseconds(*until - now), start_atom::value, index);
    return;
  }
  auto fresh = st.cl->restart_local_node(f.node);
  if (!fresh) {
    st.note(now, fmt::format("start node {} again: {}", f.node, crescent::describe(fresh.error())));
    return;
  }
  label_actors(*st.sim, st.cl->dir(), f.node);
  st.node_actors.at(f.node) = *fresh;
  const auto& agent = fresh->front();
  self->request(st.cl->dir().conductor, caf::infinite, watch_atom::value, f.node, agent)
      .then([] {},
            [st = &st, node = f.node, now](caf::error& err) {
              st->note(now, fmt::format("the conductor did not take node {} back: {}", node,
                                        crescent::describe(err)));
            });
  start_until_answered(self, st, agent, f.node, start_tries);
  start_until_answered(self, st, caf::actor_cast<caf::actor>(st.cl->dir().block_owners.at(f.node)),
                       f.node, start_tries);
  st.note(now, fmt::format("start node {} again ({} actors)", f.node, fresh->size()));
}

// Kills at their time, and starts the nodes again that say so; notes when pauses and
// partitions begin and end.
caf::behavior fault_clock(caf::event_based_actor* self, std::shared_ptr<fault_injector::state> st) {
  for (uint32_t i = 0; i < st->plan.faults.size(); ++i) {
    const auto& f = st->plan.faults[i];
    if (f.is_message_fault())
      continue;
    self->delayed_send(self, std::chrono::milliseconds(f.at_ms), fault_atom::value, i, true);
    if (f.for_ms != 0)
      self->delayed_send(self, std::chrono::milliseconds(f.at_ms + f.for_ms), fault_atom::value, i,
                         false);
    if (f.restart_after_ms != 0)
      self->delayed_send(self, std::chrono::milliseconds(f.at_ms + f.restart_after_ms),
                         start_atom::value, i);
  }
  return {[=](start_atom, uint32_t i) { restart(self, *st, i); },
          [=](fault_atom, uint32_t i, bool begins) {
            const auto& f = st->plan.faults.at(i);
            const int64_t now = st->sim->elapsed().count();
            if (!begins) {
              st->note(now, fmt::format("ends: {} (line {})", up::describe(f), f.line));
              return;
            }
            st->note(now, fmt::format("{} (line {})", up::describe(f), f.line));
            if (f.kind != up::fault_kind::kill)
              return;
            for (const auto& a : st->node_actors.at(f.node))
              self->send_exit(a, caf::exit_reason::kill);
            st->taken[i] = st->node_actors[f.node].size();
          }};
}

} // namespace

namespace {

transport::slice_verdict judge_slice(fault_injector::state& st, const transport::slice_view& v) {
  const int64_t now = st.sim->elapsed().count();
  for (size_t i = 0; i < st.plan.faults.size(); ++i) {
    const auto& f = st.plan.faults[i];
    if (!f.is_transfer_fault() || !active(f, now - st.start_ns) ||
        (f.match.node && *f.match.node != int32_t(v.remote_node)) || st.draw() >= f.probability)
      continue;
    ++st.taken[i];
    const auto verdict = up::slice_verdict_of(f.kind, f.delay_ms);
    const bool delay = verdict.fault == transport::slice_fault::delay;
    st.note(now, fmt::format("{} a {} slice of {} bytes with node {}{}",
                             delay                                              ? "delay"
                             : verdict.fault == transport::slice_fault::corrupt ? "corrupt"
                                                                                : "fail",
                             v.kind == transport::op_kind::read ? "read" : "write", v.length_bytes,
                             v.remote_node, delay ? fmt::format(" by {} ms", f.delay_ms) : ""));
    return verdict;
  }
  return transport::slice_fault::none;
}

} // namespace

void label_actors(sim_system& sim, const directory& dir, std::optional<uint32_t> only) {
  auto addr = [](const auto& h) { return caf::actor_cast<caf::actor_addr>(h); };
  auto node = [](uint32_t n) { return static_cast<int32_t>(n); };
  auto on = [&](uint32_t n) { return !only || n == *only; };
  if (!only) {
    sim.label(addr(dir.conductor), "conductor");
    sim.label(addr(dir.store_master), "store_master");
  }
  for (uint32_t i = 0; i < dir.block_owners.size(); ++i)
    if (on(i))
      sim.label(addr(dir.block_owners[i]), fmt::format("block_owner/{}", i), node(i));
  for (uint32_t i = 0; i < dir.node_agents.size(); ++i)
    if (on(i))
      sim.label(addr(dir.node_agents[i]), fmt::format("node_agent/{}", i), node(i));
  for (size_t i = 0; i < dir.prefill.size(); ++i)
    if (on(dir.prefill_node[i]))
      sim.label(addr(dir.prefill[i]), fmt::format("prefill/{}", i), node(dir.prefill_node[i]));
  for (size_t i = 0; i < dir.decode.size(); ++i)
    if (on(dir.decode_node[i]))
      sim.label(addr(dir.decode[i]), fmt::format("decode/{}", i), node(dir.decode_node[i]));
  for (size_t i = 0; i < dir.coupled.size(); ++i)
    if (on(dir.coupled_node[i]))
      sim.label(addr(dir.coupled[i]), fmt::format("coupled/{}", i), node(dir.coupled_node[i]));
}

fault_injector::fault_injector(sim_system& sim, cluster& cl, transport::transfer_engine* transfer,
                               up::fault_plan plan, uint64_t seed)
    : st_(std::make_shared<state>()), transfer_(transfer) {
  st_->plan = std::move(plan);
  st_->node_actors = actors_by_node(cl.dir());
  st_->sim = &sim;
  st_->cl = &cl;
  st_->start_ns = sim.elapsed().count();
  st_->rng.seed(seed);
  st_->taken.assign(st_->plan.faults.size(), 0);
  auto clock = sim.system().spawn(fault_clock, st_);
  sim.label(caf::actor_cast<caf::actor_addr>(clock), "faults");
  const bool slices = std::any_of(st_->plan.faults.begin(), st_->plan.faults.end(),
                                  [](const up::fault& f) { return f.is_transfer_fault(); });
  if (transfer_ != nullptr && slices)
    // Delays are simulated time: the actors act on the operation's end by their virtual clock.
    transfer_->set_fault_hook(
        [st = st_](const transport::slice_view& v) { return judge_slice(*st, v); },
        transport::fault_delays::modeled);
}

fault_injector::~fault_injector() {
  if (transfer_ != nullptr)
    transfer_->set_fault_hook({});
}

fault_verdict fault_injector::judge(const ready_message& m) {
  using action = fault_verdict::action;
  auto& st = *st_;
  const int64_t t = m.now_ns - st.start_ns;
  const auto& faults = st.plan.faults;
  // A paused node runs nothing: whatever comes for its actors waits for the end of the pause.
  for (size_t i = 0; i < faults.size(); ++i) {
    const auto& f = faults[i];
    if (f.kind == up::fault_kind::pause && active(f, t) && m.receiver_place == int32_t(f.node)) {
      ++st.taken[i];
      return {action::hold, st.start_ns + int64_t(f.at_ms + f.for_ms) * 1'000'000};
    }
  }
  const bool crosses = !m.system && m.sender != 0 && m.sender_place != m.receiver_place;
  if (!crosses)
    return {};
  for (size_t i = 0; i < faults.size(); ++i) {
    const auto& f = faults[i];
    if (f.kind < up::fault_kind::partition || f.is_transfer_fault() || !active(f, t))
      continue;
    if (f.kind == up::fault_kind::partition) {
      if (in(f.nodes, m.sender_place) != in(f.nodes, m.receiver_place)) {
        ++st.taken[i];
        st.note(m.now_ns, "partition loses " + describe_message(m));
        return {action::drop, 0};
      }
      continue;
    }
    if (!matches(f.match, m) || st.draw() >= f.probability)
      continue;
    ++st.taken[i];
    switch (f.kind) {
    case up::fault_kind::drop:
      st.note(m.now_ns, "drop " + describe_message(m));
      return {action::drop, 0};
    case up::fault_kind::duplicate:
      if (f.delay_ms > 0) {
        st.note(m.now_ns,
                fmt::format("duplicate, the copy {} ms late: {}", f.delay_ms, describe_message(m)));
        return {action::duplicate, m.now_ns + int64_t(f.delay_ms) * 1'000'000};
      }
      st.note(m.now_ns, "duplicate " + describe_message(m));
      return {action::duplicate, 0};
    case up::fault_kind::delay:
    case up::fault_kind::reorder: {
      const uint64_t hold_ms =
          f.kind == up::fault_kind::delay ? f.delay_ms : 1 + st.rng() % f.delay_ms;
      st.note(m.now_ns, fmt::format("hold {} ms: {}", hold_ms, describe_message(m)));
      return {action::hold, m.now_ns + int64_t(hold_ms) * 1'000'000};
    }
    default:
      break;
    }
  }
  return {};
}

const std::vector<uint64_t>& fault_injector::taken() const {
  return st_->taken;
}

const std::vector<std::string>& fault_injector::log() const {
  return st_->log;
}

std::string fault_injector::format_log() const {
  std::string out;
  for (size_t i = 0; i < st_->plan.faults.size(); ++i) {
    const auto& f = st_->plan.faults[i];
    const char* what = f.kind == up::fault_kind::kill        ? "actors stopped"
                       : f.kind == up::fault_kind::pause     ? "messages held"
                       : f.kind == up::fault_kind::partition ? "messages lost"
                       : f.is_transfer_fault()               ? "slices taken"
                                                             : "messages taken";
    out +=
        fmt::format("fault at line {}: {}: {} {}\n", f.line, up::describe(f), st_->taken[i], what);
  }
  for (const auto& line : st_->log)
    out += line + "\n";
  if (st_->unlisted != 0)
    out += fmt::format("... and {} more events\n", st_->unlisted);
  return out;
}

} // namespace crescent::sim
