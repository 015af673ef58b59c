// What `crescent experiment` writes for an experiment into its out dir:
//  - NAME.json: the experiment, its figure, the command that reproduces it, the Crescent commit,
//    the trace and seed, and `results` (every number plotted). Byte-identical for the same
//    command and build: nothing in it comes from the wall clock or the out dir.
//  - NAME.wall.json: wall-clock figures, where the experiment has any (scale).
//  - NAME.md: the tables (with the paper's values where the paper gives them), the notes, the
//    command, the commit and the wall time spent.
//  - NAME.png: the plot, through tools/plot_experiment.py (python3 with matplotlib).
#pragma once

#include "apps/experiment/experiment.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <string>

namespace crescent::experiment {

struct run_info {
  std::string command; // that reproduces NAME.json
  std::string commit;  // of the build (build_info.hpp)
  std::string trace_path;
  size_t requests = 0;
  uint64_t seed = 1;
  double wall_s = 0; // markdown only
};

std::string format_json(const experiment& e, const result& r, const run_info& info);
std::string format_markdown(const experiment& e, const result& r, const run_info& info);

/// The tables alone, as markdown (printed on stdout as each experiment ends).
std::string format_tables(const result& r);

/// Writes NAME.json, NAME.wall.json (when there are wall figures), NAME.md, and NAME.png when
/// `plot`. Errors name the file or the plotting command that failed.
caf::error write_outputs(const std::string& dir, const experiment& e, const result& r,
                         const run_info& info, bool plot);

} // namespace crescent::experiment
