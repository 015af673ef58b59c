#include "apps/sim/bench_conductor.hpp"

#include "actors/cluster/conductor_model.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "actors/conductor/conductor.hpp"
#include "actors/conductor/policy.hpp"
#include "apps/replay/trace.hpp"
#include "apps/replay/workload.hpp"
#include "apps/sim/paper_cluster.hpp"
#include "messages/errors.hpp"
#include "messages/schema/conductor.capnp.h"
#include "storage/block_key.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <random>

namespace crescent::sim {

namespace {

using bench_clock = std::chrono::steady_clock;

constexpr block_key bench_root_key{0, 0x6372657363656e74}; // any model's root will do
constexpr uint32_t requests_kept = 1024; // placed and not yet ended, in the actor phases
constexpr size_t report_keys = 1u << 16; // per PrefillReport, the conductor's limit

int fail(const std::string& what) {
  fmt::print(stderr, "crescent bench conductor: {}\n", what);
  return 2;
}

double percentile(std::vector<uint32_t>& xs, double p) {
  if (xs.empty())
    return 0;
  const auto k = static_cast<size_t>(p * static_cast<double>(xs.size() - 1));
  std::nth_element(xs.begin(), xs.begin() + static_cast<long>(k), xs.end());
  return xs[k];
}

void index_prompts(conductor_bench_state& s, uint32_t nodes, std::mt19937_64& rng) {
  // Each prompt's blocks on the nodes where it ran: one to three of them.
  for (const auto& keys : s.keys) {
    const uint32_t copies = 1 + static_cast<uint32_t>(rng() % 3);
    for (uint32_t c = 0; c < copies; ++c) {
      const auto node = static_cast<uint32_t>(rng() % nodes);
      for (auto key : keys) {
        s.index.add(key, node);
        s.holders.emplace_back(key, node);
      }
    }
  }
}

void fill_loads(conductor_bench_state& s, uint32_t instances, std::mt19937_64& rng) {
  const uint64_t prompt_ns = s.model->prefill_ns(8192, 0);
  for (uint32_t i = 0; i < instances; ++i) {
    const auto jobs = static_cast<uint32_t>(rng() % 7);
    s.prefill.push_back({i, true, jobs, uint64_t{jobs} * 8192, uint64_t{jobs} * prompt_ns});
    auto& loads = s.loads.emplace_back();
    const size_t n = 16 + rng() % 49;
    for (size_t k = 0; k < n; ++k)
      loads.push_back({2048 + rng() % 14336, static_cast<int64_t>(rng() % 60'000'000'000)});
    std::sort(loads.begin(), loads.end(),
              [](const decode_load& a, const decode_load& b) { return a.end_ns < b.end_ns; });
  }
  for (const auto& loads : s.loads) {
    auto& sums = s.tokens_before.emplace_back(1, 0);
    for (const auto& x : loads)
      sums.push_back(sums.back() + x.tokens);
  }
  // Hand-offs on their way: 1 to 200 ms each, ending within 10 s, where placements' first
  // tokens fall; the decode choice weighs them within its slack.
  for (uint32_t i = 0; i < instances; ++i) {
    auto& bursts = s.inbound.emplace_back();
    for (size_t k = 0, n = rng() % 4; k < n; ++k) {
      const auto end = static_cast<int64_t>(rng() % 10'000'000'000);
      bursts.push_back({end - static_cast<int64_t>(1'000'000 + rng() % 199'000'000), end});
    }
  }
  for (uint32_t i = 0; i < instances; ++i)
    s.decode.push_back(
        {i, true, s.decode_capacity_tokens, s.loads[i], s.tokens_before[i], s.inbound[i]});
}

} // namespace

schedule_view conductor_bench_state::view() const {
  schedule_view v;
  v.now_ns = 0;
  v.prefill = prefill;
  v.decode = decode;
  v.index = &index;
  v.model = model.get();
  v.prefill_queue_max = 1024;
  v.block_tokens = block_tokens;
  v.decode_tbt_slack = decode_tbt_slack;
  return v;
}

caf::expected<std::unique_ptr<conductor_bench_state>>
make_conductor_bench_state(const bench_conductor_options& opt) {
  if (opt.instances == 0 || opt.instances > node_set::capacity)
    return make_error(errc::invalid_argument,
                      "--instances: 1 to " + std::to_string(node_set::capacity) +
                          " (one node each: a cluster has at most that many nodes)");
  auto cfg = paper_cluster();
  if (!cfg)
    return std::move(cfg.error());
  auto model = conductor_time_model(*cfg);
  if (!model)
    return std::move(model.error());
  auto records = replay::read_trace(opt.trace_path, 0);
  if (!records)
    return std::move(records.error());
  if (records->empty())
    return make_error(errc::invalid_argument, "the trace has no requests: " + opt.trace_path);
  auto s = std::make_unique<conductor_bench_state>();
  s->model = *model;
  s->block_tokens = cfg->model.block_tokens;
  s->decode_capacity_tokens = cfg->decode.kv_tokens;
  s->decode_tbt_slack = cfg->conductor.decode_tbt_slack;
  replay::workload_options w;
  w.block_tokens = tokens_per_trace_block(*cfg);
  w.vocab = cfg->model.vocab;
  for (size_t i = 0; i < records->size(); ++i) {
    auto r = replay::synthesize((*records)[i], i, w);
    s->keys.push_back(storage::chain_block_keys(r.tokens, s->block_tokens, bench_root_key));
    s->prompt_tokens.push_back(static_cast<uint32_t>(r.tokens.size()));
    s->max_new_tokens.push_back(r.max_new_tokens);
  }
  std::mt19937_64 rng{1};
  index_prompts(*s, opt.instances, rng);
  // Filler: blocks of prompts not in this sample, each on one node.
  while (s->index.size() < opt.indexed_blocks && s->index.size() < prefix_index::entries_max) {
    const block_key key{rng(), rng()};
    const auto node = static_cast<uint32_t>(rng() % opt.instances);
    s->index.add(key, node);
    s->holders.emplace_back(key, node);
  }
  fill_loads(*s, opt.instances, rng);
  return s;
}

namespace {

struct policy_row {
  std::string name;
  double per_s = 0, p50_us = 0, p99_us = 0, placed_share = 0;
};

policy_row time_policy(const conductor_bench_state& s, policy_kind kind, uint32_t decisions) {
  scheduling_policy policy{kind, 1};
  const auto v = s.view();
  auto request = [&](size_t i) {
    const size_t k = i % s.keys.size();
    return request_view{s.prompt_tokens[k], s.max_new_tokens[k], s.keys[k]};
  };
  for (size_t i = 0; i < 1000; ++i) // warm the caches and the generator
    (void)policy.place(v, request(i));
  std::vector<uint32_t> ns(decisions);
  size_t placed = 0;
  const auto start = bench_clock::now();
  for (uint32_t i = 0; i < decisions; ++i) {
    const auto r = request(i);
    const auto t0 = bench_clock::now();
    const auto d = policy.place(v, r);
    const auto t1 = bench_clock::now();
    ns[i] = static_cast<uint32_t>(std::chrono::nanoseconds(t1 - t0).count());
    placed += d.placed ? 1 : 0;
  }
  const double wall_s = std::chrono::duration<double>(bench_clock::now() - start).count();
  policy_row row{to_string(kind), decisions / wall_s, 0, 0, 0};
  row.p50_us = percentile(ns, 0.50) / 1e3;
  row.p99_us = percentile(ns, 0.99) / 1e3;
  row.placed_share = static_cast<double>(placed) / decisions;
  return row;
}

// -- through the actor -----------------------------------------------------------------------

typed_envelope<wire::ScheduleRequest> schedule_request(const conductor_bench_state& s, uint64_t id,
                                                       size_t k) {
  return make_envelope<wire::ScheduleRequest>([&](wire::ScheduleRequest::Builder out) {
    out.setRequestId(id);
    out.setPromptTokens(s.prompt_tokens[k]);
    out.setMaxNewTokens(s.max_new_tokens[k]);
    write_keys(out.initBlockKeys(static_cast<unsigned>(s.keys[k].size())), s.keys[k]);
  });
}

typed_envelope<wire::RequestReport> request_ended(uint64_t id) {
  return make_envelope<wire::RequestReport>([&](wire::RequestReport::Builder out) {
    out.setRequestId(id);
    out.setCompleted(true);
  });
}

struct actor_phase {
  std::vector<typed_envelope<wire::ScheduleRequest>> requests; // built before the clock starts
  std::vector<typed_envelope<wire::RequestReport>> ends;       // one per request
  uint32_t window = 1;
};

struct actor_result {
  double per_s = 0, p50_us = 0, p99_us = 0;
};

struct driver_state {
  caf::actor target;
  std::shared_ptr<const actor_phase> phase;
  std::shared_ptr<std::promise<actor_result>> done;
  size_t next = 0, answered = 0;
  std::deque<size_t> kept; // answered, not yet ended
  std::vector<bench_clock::time_point> sent;
  std::vector<uint32_t> rtt_ns;
  bench_clock::time_point start;
};

using driver_ptr = caf::stateful_actor<driver_state>*;

void finish(driver_ptr self) {
  auto& st = self->state;
  const double wall_s = std::chrono::duration<double>(bench_clock::now() - st.start).count();
  actor_result r;
  r.per_s = static_cast<double>(st.answered) / wall_s;
  r.p50_us = percentile(st.rtt_ns, 0.50) / 1e3;
  r.p99_us = percentile(st.rtt_ns, 0.99) / 1e3;
  // What is still held ends too: the next phase starts from the same load.
  for (auto k : st.kept)
    self->send(st.target, finished_atom::value, st.phase->ends[k]);
  st.done->set_value(r);
  self->quit();
}

void send_next(driver_ptr self);

// A request ends (RequestReport) once `requests_kept` newer ones were answered, so that the
// conductor holds a steady load; the next one goes out in its place.
void on_answer(driver_ptr self, size_t k) {
  auto& st = self->state;
  st.rtt_ns.push_back(
      static_cast<uint32_t>(std::chrono::nanoseconds(bench_clock::now() - st.sent[k]).count()));
  ++st.answered;
  st.kept.push_back(k);
  if (st.kept.size() > requests_kept) {
    self->send(st.target, finished_atom::value, st.phase->ends[st.kept.front()]);
    st.kept.pop_front();
  }
  if (st.next < st.phase->requests.size())
    send_next(self);
  else if (st.answered == st.phase->requests.size())
    finish(self);
}

void send_next(driver_ptr self) {
  auto& st = self->state;
  const size_t k = st.next++;
  st.sent[k] = bench_clock::now();
  self->request(st.target, std::chrono::seconds(60), schedule_atom::value, st.phase->requests[k])
      .then([self, k](const typed_envelope<wire::ScheduleReply>&) { on_answer(self, k); },
            [self](caf::error& err) {
              spdlog::error("bench conductor: a schedule request failed: {}", describe(err));
              self->state.done->set_value({});
              self->quit(err);
            });
}

// Keeps the phase's window of requests in flight until all are answered.
caf::behavior driver(driver_ptr self, caf::actor target, std::shared_ptr<const actor_phase> phase,
                     std::shared_ptr<std::promise<actor_result>> done) {
  auto& st = self->state;
  st.target = std::move(target);
  st.phase = std::move(phase);
  st.done = std::move(done);
  st.sent.resize(st.phase->requests.size());
  st.rtt_ns.reserve(st.phase->requests.size());
  return {[self](run_atom) {
    auto& st = self->state;
    st.start = bench_clock::now();
    const size_t n = std::min<size_t>(st.phase->window, st.phase->requests.size());
    for (size_t i = 0; i < n; ++i)
      send_next(self);
  }};
}

// The baseline: answers a schedule request with a prebuilt reply, takes request ends.
caf::behavior echo(caf::event_based_actor*, typed_envelope<wire::ScheduleReply> reply) {
  return {[reply](schedule_atom, const typed_envelope<wire::ScheduleRequest>&) { return reply; },
          [](finished_atom, const typed_envelope<wire::RequestReport>&) {}};
}

actor_result run_phase(caf::actor_system& sys, const caf::actor& target,
                       std::shared_ptr<const actor_phase> phase) {
  auto done = std::make_shared<std::promise<actor_result>>();
  auto result = done->get_future();
  auto d = sys.spawn(driver, target, std::move(phase), done);
  caf::anon_send(d, run_atom::value);
  return result.get();
}

std::shared_ptr<actor_phase> make_phase(const conductor_bench_state& s, uint64_t first_id,
                                        uint32_t n, uint32_t window) {
  auto p = std::make_shared<actor_phase>();
  p->window = window;
  for (uint32_t i = 0; i < n; ++i) {
    p->requests.push_back(schedule_request(s, first_id + i, i % s.keys.size()));
    p->ends.push_back(request_ended(first_id + i));
  }
  return p;
}

// `reporter` stands for every prefill instance: the conductor takes reports only from them.
conductor_options conductor_for(const conductor_bench_state& s, uint32_t instances,
                                const caf::actor& reporter) {
  conductor_options o;
  directory dir;
  dir.prefill.assign(instances, caf::actor_cast<prefill_worker_actor>(reporter));
  o.dir = directory_ref::of(std::move(dir));
  o.nodes = instances;
  for (uint32_t i = 0; i < instances; ++i) {
    o.prefill_node.push_back(i);
    o.decode_node.push_back(i);
  }
  o.prefill_queue_max = 1024;
  o.heartbeat_timeout = std::chrono::hours(24); // no agents here: every node stays live
  o.block_tokens = s.block_tokens;
  o.decode_capacity_tokens = s.decode_capacity_tokens;
  o.decode_tbt_slack = s.decode_tbt_slack;
  o.model = s.model;
  return o;
}

// The conductor learns the index as a running one does: from prefill reports, per node, sent by
// `self` (the reporter it was given).
caf::error teach_index(caf::scoped_actor& self, const conductor_actor& c,
                       const conductor_bench_state& s) {
  std::vector<std::vector<block_key>> per_node(s.prefill.size());
  for (const auto& [key, node] : s.holders)
    per_node[node].push_back(key);
  caf::error failed;
  for (uint32_t node = 0; node < per_node.size(); ++node)
    for (size_t at = 0; at < per_node[node].size(); at += report_keys) {
      const size_t n = std::min(report_keys, per_node[node].size() - at);
      auto msg = make_envelope<wire::PrefillReport>([&](wire::PrefillReport::Builder out) {
        out.setRequestId(0);
        out.setInstance(node);
        out.setNode(node);
        auto keys = out.initStoredKeys(static_cast<unsigned>(n));
        for (unsigned i = 0; i < n; ++i)
          write_key(keys[i], per_node[node][at + i]);
      });
      self->request(c, std::chrono::seconds(60), report_atom::value, msg)
          .receive([] {}, [&](caf::error& err) { failed = std::move(err); });
      if (failed)
        return failed;
    }
  return caf::none;
}

void print_policy_rows(const std::vector<policy_row>& rows) {
  const double baseline = rows.front().per_s;
  fmt::print("{:<20} {:>14} {:>9} {:>9} {:>8} {:>13}\n", "policy", "decisions/s", "p50 us",
             "p99 us", "placed", "vs round_robin");
  for (const auto& r : rows)
    fmt::print("{:<20} {:>14.0f} {:>9.2f} {:>9.2f} {:>7.1f}% {:>12.3f}x\n", r.name, r.per_s,
               r.p50_us, r.p99_us, 100 * r.placed_share, r.per_s / baseline);
}

} // namespace

int bench_conductor(const bench_conductor_options& opt) {
  spdlog::set_level(spdlog::level::err);
  if (opt.decisions == 0 || opt.actor_requests == 0)
    return fail("--decisions and --actor-requests must be at least 1");
  auto s = make_conductor_bench_state(opt);
  if (!s)
    return fail(describe(s.error()));
  const auto& state = **s;
  size_t blocks = 0;
  for (const auto& k : state.keys)
    blocks += k.size();
  fmt::print("crescent bench conductor: {} prefill + {} decode instances, {} blocks indexed, {} "
             "prompts from {} (paper model, {}-token blocks, {:.1f} blocks a prompt)\n",
             opt.instances, opt.instances, state.index.size(), state.keys.size(), opt.trace_path,
             state.block_tokens,
             static_cast<double>(blocks) / static_cast<double>(state.keys.size()));
  // -- the policy alone, on this thread --
  std::vector<policy_row> rows;
  for (auto kind :
       {policy_kind::round_robin, policy_kind::random, policy_kind::least_loaded,
        policy_kind::local_cache_aware, policy_kind::block_cost, policy_kind::global_cache_aware})
    rows.push_back(time_policy(state, kind, opt.decisions));
  fmt::print("\nthe policy alone ({} decisions each, admission predicted_load, one thread):\n",
             opt.decisions);
  print_policy_rows(rows);
  const auto& global = rows.back();
  fmt::print("target: global_cache_aware >= 200000 decisions/s with p99 <= 20 us: {:.0f}/s, p99 "
             "{:.2f} us: {}\n",
             global.per_s, global.p99_us,
             global.per_s >= 200'000 && global.p99_us <= 20 ? "met" : "NOT met");
  // -- through the actor --
  caf::actor_system_config cfg;
  setup_actor_system(cfg, false);
  cfg.set("scheduler.max-threads", size_t{2}); // the driver's thread and the conductor's
  caf::actor_system sys{cfg};
  caf::scoped_actor reporter{sys};
  auto conductor = spawn_conductor(
      sys, conductor_for(state, opt.instances, caf::actor_cast<caf::actor>(reporter)));
  if (auto err = teach_index(reporter, conductor, state))
    return fail("teaching the conductor its index: " + describe(err));
  auto reply = make_envelope<wire::ScheduleReply>([](wire::ScheduleReply::Builder out) {
    out.setRequestId(1);
    out.initPlaced().setPrefillInstance(1);
  });
  auto baseline = sys.spawn(echo, reply);
  const uint32_t n = opt.actor_requests;
  const auto target = caf::actor_cast<caf::actor>(conductor);
  auto echoed = run_phase(sys, baseline, make_phase(state, 1, n, 64));
  auto windowed = run_phase(sys, target, make_phase(state, 1, n, 64));
  auto single = run_phase(sys, target, make_phase(state, 1 + n, std::min(n, 20'000u), 1));
  caf::anon_send_exit(conductor, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(baseline, caf::exit_reason::user_shutdown);
  fmt::print("\nthrough the actor ({} ScheduleRequest envelopes, a driver actor on a second "
             "thread):\n",
             n);
  fmt::print("{:<34} {:>14} {:>10} {:>10} {:>10}\n", "", "requests/s", "rtt p50 us", "rtt p99 us",
             "vs echo");
  auto line = [&](const char* name, const actor_result& r) {
    fmt::print("{:<34} {:>14.0f} {:>10.2f} {:>10.2f} {:>9.3f}x\n", name, r.per_s, r.p50_us,
               r.p99_us, echoed.per_s > 0 ? r.per_s / echoed.per_s : 0);
  };
  line("echo actor, 64 in flight (baseline)", echoed);
  line("conductor, 64 in flight", windowed);
  line("conductor, one at a time", single);
  fmt::print("target: through the actor >= 50000 decisions/s: {:.0f}/s: {}\n", windowed.per_s,
             windowed.per_s >= 50'000 ? "met" : "NOT met");
  return 0;
}

} // namespace crescent::sim
