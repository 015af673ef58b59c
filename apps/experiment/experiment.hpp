// `crescent experiment NAME`: the paper's figures, each re-run in simulated time on the built-in
// paper cluster (apps/sim/paper_cluster.hpp) unless it says otherwise, over any trace of the
// Mooncake format (docs/experiments.md).
//
// An experiment is one small file: a class with a name, a line saying what it measures, the
// paper's figure it re-draws, the number of simulations it plans (for the progress bar), and
// run(), which returns every number it plots as JSON and the markdown beside it (tables, with
// the paper's values where the paper gives them, and notes where Crescent's differ). The command
// (experiment_command.hpp) writes NAME.json, NAME.md and NAME.png around that; registry.cpp
// lists the experiments.
//
// Determinism: the JSON is made of what the simulations decide (the same trace and seed give the
// same bytes); wall-clock figures, which the machine decides, go to result::wall, written to
// NAME.wall.json and the markdown, never into NAME.json.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "apps/replay/trace.hpp"
#include "apps/sim/replay_command.hpp"

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace crescent::experiment {

using json = nlohmann::ordered_json;

class progress;

/// What every experiment runs on, and how it runs its simulations.
class context {
 public:
  /// `paper`: the cluster the experiments start from, the built-in paper cluster
  /// (sim::paper_cluster). Tests give it less memory than it allocates (and prefaults: 0.6 GB,
  /// most of a small run's time), as much as their small traces can fill, which changes nothing
  /// in a run that never fills it.
  context(const std::vector<replay::trace_record>& trace, std::string trace_name, uint64_t seed,
          progress& bar, cluster_config paper)
      : trace_(trace), trace_name_(std::move(trace_name)), seed_(seed), bar_(bar),
        paper_(std::move(paper)) {}

  const std::vector<replay::trace_record>& trace() const { return trace_; }
  const cluster_config& paper_cluster() const { return paper_; }
  const std::string& trace_name() const { return trace_name_; }
  uint64_t seed() const { return seed_; }

  /// Runs one simulation of `records` on `cfg` with this context's seed (access keys, the
  /// random policy), as run `label` of the experiment on the progress bar.
  caf::expected<sim::simulation> simulate(const std::string& label, cluster_config cfg,
                                          std::vector<replay::trace_record> records,
                                          sim::simulate_options opt = {});

  /// The same on the whole trace.
  caf::expected<sim::simulation> simulate(const std::string& label, cluster_config cfg,
                                          sim::simulate_options opt = {}) {
    return simulate(label, std::move(cfg), trace_, std::move(opt));
  }

  /// Wall-clock seconds the simulations of this experiment took so far.
  double wall_s() const { return wall_s_; }

 private:
  const std::vector<replay::trace_record>& trace_;
  std::string trace_name_;
  uint64_t seed_;
  progress& bar_;
  cluster_config paper_;
  double wall_s_ = 0;
};

/// A markdown table: a caption, a header row and rows of cells.
struct table {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct result {
  json data = json::object(); // every number plotted: NAME.json's "results"
  json wall = json::object(); // wall-clock figures: NAME.wall.json, never NAME.json
  std::vector<table> tables;
  std::vector<std::string> notes; // markdown paragraphs: how it was run, how it differs
};

class experiment {
 public:
  virtual ~experiment() = default;
  virtual std::string_view name() const = 0;
  /// One line: what it measures.
  virtual std::string_view description() const = 0;
  /// The paper's figure it re-draws ("Fig. 9"), or what it stands beside.
  virtual std::string_view figure() const = 0;
  /// Simulations it plans on this trace (the progress bar's estimate; it may run more).
  virtual size_t planned_runs(const std::vector<replay::trace_record>& trace) const = 0;
  virtual caf::expected<result> run(context& ctx) const = 0;
};

} // namespace crescent::experiment
