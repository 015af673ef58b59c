// replicas (Fig. 11): how many DRAM replicas the blocks ranked 10th, 100th, 1,000th and 10,000th
// by use have over time, on the paper cluster with its default scheduling (Algorithm 1, pulled
// blocks copied to the node that pulled them).
//
// Read from the messages the conductor receives, as its prefix index learns them: a prefill
// report names the nodes that hold each block it stored or copied (the store master placed and
// committed them), and the store master's BlocksGone names the node a block was evicted from. A
// block's use is the number of requests whose ScheduleRequest names it. Nothing is added to the
// actors: the run is the plain replay (its message hash is unchanged), watched.
#include "actors/common/node_set.hpp"
#include "apps/experiment/measures.hpp"
#include "apps/experiment/registry.hpp"
#include "apps/sim/sim_system.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <unordered_map>

namespace crescent::experiment {

namespace {

constexpr std::array<size_t, 4> ranks = {10, 100, 1000, 10000};
constexpr size_t samples = 200; // points of each curve over the run

struct block_state {
  node_set nodes; // the nodes holding a replica
  uint32_t uses = 0;
  uint32_t first_seen = 0; // order of first use: ties in use rank by it
  uint32_t position = 0;   // its index in the prompt that first named it
};

struct replica_change {
  int64_t time_ns;
  block_key key;
  uint32_t replicas;
};

// Follows the conductor's incoming messages.
class replica_tracker {
 public:
  void on_message(const sim::sim_system& sim, const sim::delivered_message& m,
                  const envelope* payload) {
    if (payload == nullptr || sim.labels()[m.receiver] != "conductor")
      return;
    const uint64_t schema = payload->schema_id();
    if (schema == capnp::typeId<wire::ScheduleRequest>())
      on_schedule(*payload);
    else if (schema == capnp::typeId<wire::PrefillReport>())
      on_report(m.time_ns, *payload);
    else if (schema == capnp::typeId<wire::BlocksGone>())
      on_gone(m.time_ns, *payload);
  }

  const std::unordered_map<block_key, block_state>& blocks() const { return blocks_; }
  const std::vector<replica_change>& changes() const { return changes_; }

 private:
  void on_schedule(const envelope& e) {
    auto keys = read_as<wire::ScheduleRequest>(
        e, [](wire::ScheduleRequest::Reader in) { return to_keys(in.getBlockKeys()); });
    if (!keys)
      return;
    for (uint32_t i = 0; i < keys->size(); ++i) {
      auto [b, fresh] = blocks_.try_emplace((*keys)[i]);
      if (fresh) {
        b->second.first_seen = static_cast<uint32_t>(blocks_.size());
        b->second.position = i;
      }
      ++b->second.uses;
    }
  }

  void on_report(int64_t time_ns, const envelope& e) {
    struct stored {
      uint32_t node;
      std::vector<block_key> keys;
      std::vector<uint64_t> on;
    };
    auto r = read_as<wire::PrefillReport>(e, [](wire::PrefillReport::Reader in) {
      return stored{in.getNode(), to_keys(in.getStoredKeys()), to_vector(in.getStoredOn())};
    });
    if (!r)
      return;
    for (size_t k = 0; k < r->keys.size(); ++k) {
      node_set holders;
      if (r->on.size() == r->keys.size() * node_set::words)
        holders = node_set::from_words(std::span<const uint64_t, node_set::words>{
            &r->on[k * node_set::words], node_set::words});
      else if (r->node < node_set::capacity)
        holders.insert(r->node);
      holders |= blocks_[r->keys[k]].nodes;
      set(time_ns, r->keys[k], holders);
    }
  }

  void on_gone(int64_t time_ns, const envelope& e) {
    struct gone {
      uint32_t node;
      std::vector<block_key> keys;
    };
    auto g = read_as<wire::BlocksGone>(e, [](wire::BlocksGone::Reader in) {
      return gone{in.getNode(), to_keys(in.getKeys())};
    });
    if (!g || g->node >= node_set::capacity)
      return;
    for (auto key : g->keys)
      if (auto b = blocks_.find(key); b != blocks_.end()) {
        auto holders = b->second.nodes;
        holders.erase(g->node);
        set(time_ns, key, holders);
      }
  }

  void set(int64_t time_ns, block_key key, const node_set& nodes) {
    auto& b = blocks_[key];
    if (b.nodes == nodes)
      return;
    b.nodes = nodes;
    changes_.push_back({time_ns, key, nodes.size()});
  }

  std::unordered_map<block_key, block_state> blocks_;
  std::vector<replica_change> changes_;
};

// Blocks by use, most used first; ties by first use.
std::vector<block_key> by_use(const std::unordered_map<block_key, block_state>& blocks) {
  std::vector<block_key> keys;
  for (const auto& [key, b] : blocks)
    if (b.uses > 0)
      keys.push_back(key);
  std::sort(keys.begin(), keys.end(), [&](const block_key& x, const block_key& y) {
    const auto &a = blocks.at(x), &b = blocks.at(y);
    return a.uses != b.uses ? a.uses > b.uses : a.first_seen < b.first_seen;
  });
  return keys;
}

// The replica count of `key` at each of `times_ns` (the changes are in time order).
std::vector<uint32_t> curve_of(block_key key, const std::vector<replica_change>& changes,
                               const std::vector<int64_t>& times_ns) {
  std::vector<uint32_t> out;
  uint32_t now = 0;
  size_t c = 0;
  for (int64_t t : times_ns) {
    for (; c < changes.size() && changes[c].time_ns <= t; ++c)
      if (changes[c].key == key)
        now = changes[c].replicas;
    out.push_back(now);
  }
  return out;
}

class replicas_experiment final : public experiment {
 public:
  std::string_view name() const override { return "replicas"; }
  std::string_view description() const override {
    return "replica count over time of the blocks ranked 10th, 100th, 1,000th, 10,000th by use";
  }
  std::string_view figure() const override { return "Fig. 11"; }
  size_t planned_runs(const std::vector<replay::trace_record>&) const override { return 1; }

  caf::expected<result> run(context& ctx) const override {
    replica_tracker tracker;
    sim::simulate_options opt;
    opt.watch = [&](const sim::sim_system& sim, const sim::delivered_message& m,
                    const envelope* payload) { tracker.on_message(sim, m, payload); };
    auto s = ctx.simulate("paper cluster, replicas as the conductor learns them",
                          ctx.paper_cluster(), opt);
    if (!s)
      return std::move(s.error());
    const double end_s = s->report.virtual_end_s;
    std::vector<int64_t> times_ns;
    for (size_t i = 0; i <= samples; ++i)
      times_ns.push_back(static_cast<int64_t>(end_s * 1e9 * static_cast<double>(i) / samples));
    return describe(tracker, times_ns, s->report, ctx.paper_cluster());
  }

 private:
  static result describe(const replica_tracker& tracker, const std::vector<int64_t>& times_ns,
                         const sim::sim_report& report, const cluster_config& cfg) {
    const auto order = by_use(tracker.blocks());
    result out;
    auto& d = out.data;
    d["policy"] = to_string(cfg.conductor.policy);
    d["copy_pulled"] = cfg.pool.copy_pulled;
    d["blocks_used"] = order.size();
    d["replicas_added"] = report.replicas_added;
    json time_s = json::array();
    for (auto t : times_ns)
      time_s.push_back(rounded(static_cast<double>(t) / 1e9, 3));
    d["time_s"] = time_s;
    table t;
    t.caption = "Blocks by use: replicas over the run";
    t.header = {"rank by use", "requests using it", "position in its prompt (block)",
                "replicas: most", "replicas: mean over time"};
    json curves = json::array();
    for (size_t rank : ranks) {
      if (rank > order.size())
        continue;
      const block_key key = order[rank - 1];
      const auto& b = tracker.blocks().at(key);
      const auto curve = curve_of(key, tracker.changes(), times_ns);
      const uint32_t most = *std::max_element(curve.begin(), curve.end());
      double mean = 0;
      for (auto c : curve)
        mean += c;
      mean /= static_cast<double>(curve.size());
      curves.push_back({{"rank", rank},
                        {"uses", b.uses},
                        {"position", b.position},
                        {"replicas", curve},
                        {"replicas_max", most},
                        {"replicas_mean", rounded(mean, 4)}});
      t.rows.push_back({fmt::format("{}", rank), fmt::format("{}", b.uses),
                        fmt::format("{}", b.position), fmt::format("{}", most),
                        fmt::format("{:.2f}", mean)});
    }
    d["blocks"] = curves;
    out.tables.push_back(std::move(t));
    uint32_t prefill_nodes = 0;
    for (const auto& n : cfg.nodes)
      prefill_nodes += n.prefill_instances > 0 ? 1 : 0;
    out.notes = notes(order.size(), report.replicas_added, prefill_nodes,
                      cfg.conductor.kvcache_balancing_threshold);
    return out;
  }

  static std::vector<std::string> notes(size_t used, uint64_t copies, uint32_t prefill_nodes,
                                        double threshold) {
    return {
        fmt::format(
            "{} distinct full blocks were named by requests; {} replicas were added by copying "
            "pulled blocks to the node that pulled them. A block's replicas are counted as the "
            "conductor's prefix index learns them: from the prefill reports (where the store "
            "master put each new block or copy) and the store master's evictions. Only the {} "
            "prefill nodes ever hold blocks (new blocks and copies go to the writer's node), so "
            "{} is the most a block can have.",
            used, copies, prefill_nodes, prefill_nodes),
        fmt::format(
            "A block gains a replica only when a request pulls it: Algorithm 1 reads a prefix "
            "from another node when it is more than kvcache_balancing_threshold ({:g}) times "
            "the prefix held locally, and the copy is then evicted like any other block. "
            "REFERENCE.md records no values of the paper's Fig. 11 (replica counts of keys over "
            "time), so only the shape compares: whether blocks used more often hold more "
            "replicas, and for how long.",
            threshold)};
  }
};

} // namespace

std::unique_ptr<experiment> make_replicas_experiment() {
  return std::make_unique<replicas_experiment>();
}

} // namespace crescent::experiment
