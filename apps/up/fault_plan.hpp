// A fault plan: what to break, when, in a run of `crescent up` (docs/faults.md). YAML:
//
//   faults:
//     - {at_ms: 2000, kill: 3}               # SIGKILL node 3's process
//     - {at_ms: 1000, pause: 2, for_ms: 2000} # SIGSTOP node 2's process, SIGCONT 2 s later
//
// Times count from the first request's submission. Every node named must run in a process of
// its own (have an address in the cluster file). Kinds not listed here (partitions, message loss,
// delays, duplicates, transfer faults) are not built yet and are refused by name.
#pragma once

#include "actors/cluster/cluster_config.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::up {

enum class fault_kind { kill, pause };

struct fault {
  fault_kind kind = fault_kind::kill;
  uint32_t node = 0;
  uint64_t at_ms = 0;
  uint64_t for_ms = 0; // pause: how long
  int line = 0;        // in the plan file, for messages
};

struct fault_plan {
  std::vector<fault> faults; // in time order
};

inline constexpr size_t faults_max = 1024;
inline constexpr uint64_t fault_time_ms_max = 24ull * 3600 * 1000;

/// Parses a plan; errors name the source, the line and the field.
caf::expected<fault_plan> parse_fault_plan(const std::string& yaml_text, const std::string& source);
caf::expected<fault_plan> load_fault_plan(const std::string& path);

/// Checks the plan against the cluster: each node it names exists and runs in a process of its
/// own; a node is not killed twice, nor paused after it was killed or while paused.
caf::error check_fault_plan(const fault_plan& plan, const cluster_config& cfg,
                            const std::string& source);

/// "kill node 3", "pause node 2 for 2000 ms".
std::string describe(const fault& f);

} // namespace crescent::up
