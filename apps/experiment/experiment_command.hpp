// `crescent experiment NAME|all [--trace FILE] [--out DIR] [--seed N] [--requests N]`: runs one
// experiment, or every one that can run, and writes NAME.json, NAME.md and NAME.png of each
// into DIR (output.hpp). Exit status: 0 when every experiment ran and was written, 1 when one
// failed on the way (the others still run), 2 when nothing could start (an unknown or
// unavailable name, a bad seed, an unreadable or empty trace, an out dir that cannot be written).
#pragma once

#include <cstdint>
#include <string>

namespace crescent::experiment {

struct experiment_options {
  std::string name; // an experiment's name, or "all"
  std::string trace_path = "data/synthetic_trace.jsonl";
  std::string out_dir = "experiments";
  std::string seed = "1"; // checked here, so that a bad one gets this command's message
  uint32_t requests = 0;  // from the head of the trace; 0: all
  bool progress = true;
  bool plots = true;
};

int experiment_command(const experiment_options& opt);

/// The experiments, one a line (name, figure, what it measures), and those not available yet:
/// for `crescent experiment --help`.
std::string experiment_list();

} // namespace crescent::experiment
