#include "apps/experiment/experiment_command.hpp"

#include "apps/experiment/build_info.hpp"
#include "apps/experiment/output.hpp"
#include "apps/experiment/progress.hpp"
#include "apps/experiment/registry.hpp"
#include "apps/sim/paper_cluster.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

namespace crescent::experiment {

namespace {

constexpr const char* default_trace = "data/synthetic_trace.jsonl";

int fail(const std::string& what) {
  fmt::print(stderr, "crescent experiment: {}\n", what);
  return 2;
}

std::string available_names() {
  std::string out;
  for (const auto& e : experiments())
    out += (out.empty() ? "" : ", ") + std::string{e->name()};
  return out;
}

caf::expected<std::vector<const experiment*>> select(const std::string& name) {
  std::vector<const experiment*> out;
  if (name == "all") {
    for (const auto& e : experiments())
      out.push_back(e.get());
    return out;
  }
  if (const auto* e = find_experiment(name)) {
    out.push_back(e);
    return out;
  }
  return make_error(
      errc::invalid_argument,
      fmt::format("unknown experiment '{}'; the experiments: {}, or all", name, available_names()));
}

// A positive integer that fits 64 bits, nothing else (no sign, spaces or suffix).
std::optional<uint64_t> parse_seed(const std::string& text) {
  uint64_t v = 0;
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end || v == 0)
    return std::nullopt;
  return v;
}

// Before any simulation: a dir that cannot take the outputs would lose all of the runs.
caf::error check_out_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return make_error(errc::io_error, fmt::format("--out {}: cannot create the directory{}", dir,
                                                  ec ? ": " + ec.message() : ""));
  const auto probe = std::filesystem::path{dir} / ".crescent-experiment-probe";
  {
    std::ofstream out{probe};
    out << "probe\n";
    out.close();
    if (!out) {
      std::filesystem::remove(probe, ec);
      return make_error(errc::io_error, "--out " + dir + ": cannot write there");
    }
  }
  std::filesystem::remove(probe, ec);
  return caf::none;
}

caf::expected<std::vector<replay::trace_record>> read_trace(const experiment_options& opt) {
  if (opt.trace_path == default_trace && !std::filesystem::exists(opt.trace_path))
    return make_error(errc::not_found,
                      fmt::format("the default trace {} is not there (tried {}): run from the "
                                  "repository root or pass --trace FILE",
                                  default_trace,
                                  std::filesystem::absolute(opt.trace_path).string()));
  return replay::read_trace(opt.trace_path, opt.requests); // an empty trace is an error too
}

// The command that reproduces one experiment's JSON (the out dir is not in it: where the files
// go changes nothing in them).
std::string command_of(const experiment& e, const experiment_options& opt, uint64_t seed) {
  std::string cmd =
      fmt::format("crescent experiment {} --trace {} --seed {}", e.name(), opt.trace_path, seed);
  if (opt.requests != 0)
    cmd += fmt::format(" --requests {}", opt.requests);
  return cmd;
}

bool run_one(const experiment& e, const std::vector<replay::trace_record>& trace,
             const experiment_options& opt, uint64_t seed, const cluster_config& paper,
             progress& bar) {
  bar.begin_experiment(e.name(), e.planned_runs(trace));
  context ctx{trace, opt.trace_path, seed, bar, paper};
  auto r = e.run(ctx);
  if (!r) {
    fmt::print(stderr, "crescent experiment: {} failed: {}\n", e.name(), describe(r.error()));
    return false;
  }
  const run_info info{command_of(e, opt, seed),
                      std::string{built_commit()},
                      opt.trace_path,
                      trace.size(),
                      seed,
                      ctx.wall_s()};
  fmt::print("\n## {} ({})\n\n{}", e.name(), e.figure(), format_tables(*r));
  std::fflush(stdout);
  if (auto err = write_outputs(opt.out_dir, e, *r, info, opt.plots)) {
    fmt::print(stderr, "crescent experiment: {}: {}\n", e.name(), describe(err));
    return false;
  }
  fmt::print("wrote {}/{}.json, .md{} ({} of simulations)\n", opt.out_dir, e.name(),
             opt.plots ? ", .png" : "", format_duration(ctx.wall_s()));
  std::fflush(stdout); // before the next experiment's progress lines on stderr
  return true;
}

} // namespace

int experiment_command(const experiment_options& opt) {
  spdlog::set_level(spdlog::level::err);
  auto chosen = select(opt.name);
  if (!chosen)
    return fail(describe(chosen.error()));
  const auto seed = parse_seed(opt.seed);
  if (!seed)
    return fail("--seed " + opt.seed + ": expected a positive integer below 2^64");
  auto trace = read_trace(opt);
  if (!trace)
    return fail(describe(trace.error()));
  if (auto err = check_out_dir(opt.out_dir))
    return fail(describe(err));
  auto paper = sim::paper_cluster();
  if (!paper)
    return fail(describe(paper.error()));
  size_t planned = 0;
  for (const auto* e : *chosen)
    planned += e->planned_runs(*trace);
  fmt::print("crescent experiment {}: {} requests from {}, seed {}, into {} (Crescent {})\n",
             opt.name, trace->size(), opt.trace_path, *seed, opt.out_dir, built_commit());
  std::fflush(stdout);
  progress bar{opt.progress, chosen->size(), planned};
  size_t failed = 0;
  for (const auto* e : *chosen)
    failed += run_one(*e, *trace, opt, *seed, *paper, bar) ? 0 : 1;
  fmt::print("\n{} of {} experiments written in {} of wall time\n", chosen->size() - failed,
             chosen->size(), format_duration(bar.elapsed_s()));
  return failed == 0 ? 0 : 1;
}

std::string experiment_list() {
  std::string out = "Experiments (NAME, or all to run every one in this order):\n";
  for (const auto& e : experiments())
    out += fmt::format("  {:<20} {}: {}\n", e->name(), e->figure(), e->description());
  return out;
}

} // namespace crescent::experiment
