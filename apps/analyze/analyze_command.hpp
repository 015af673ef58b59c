// `crescent analyze hitrate`: the prefix hit rate of one global LRU cache over a trace, per
// cache capacity (apps/analyze/hitrate.hpp says exactly what is counted).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::cli {

struct hitrate_options {
  std::string trace_path;
  std::vector<std::string> capacities; // each a token count or `unbounded` (0: the same)
  uint32_t block_tokens = 512;         // must divide 512
  bool json = false;                   // one JSON object instead of the table
};

/// Prints one row per capacity: capacity (tokens), hit rate, reused and prompt tokens.
/// Returns 0, or 2 with a message on stderr for a bad argument or trace (the message names
/// the trace's line and field).
int hitrate_command(const hitrate_options& opt);

} // namespace crescent::cli
