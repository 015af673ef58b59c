// `crescent replay TRACE --sim`: a trace through the cluster's real actors in simulated time
// (sim_system.hpp), on the built-in paper cluster (paper_cluster.hpp) or a cluster file, as fast
// as the CPU allows; docs/simulation.md.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "apps/replay/trace.hpp"
#include "apps/replay/workload.hpp"
#include "apps/sim/sim_report.hpp"
#include "apps/up/fault_plan.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace crescent {
class envelope;
class cluster;
} // namespace crescent

namespace crescent::sim {

class sim_system;
struct delivered_message;

struct replay_options {
  std::string trace_path;
  bool sim = false;
  std::string cluster_path; // empty: the built-in paper cluster
  std::string coupled;      // the built-in coupled baseline instead (parse_coupled_mode)
  uint32_t requests = 0;    // from the head of the trace; 0: all
  double speedup = 1.0;     // arrivals this many times faster than the trace's
  // One request at a time, timestamps ignored (replay_driver.hpp): for checks that need
  // requests that never overlap (the hit-rate agreement with crescent analyze).
  bool sequential = false;
  uint64_t seed = 1;                    // access keys and the store master's random placement
  std::optional<uint64_t> shuffle_seed; // deliver ready messages in a seeded order; none: FIFO
  std::string report_path;              // JSON
  std::string plots_dir;
  std::string messages_path;
  std::string faults_path; // a fault plan (docs/faults.md); empty: none
  bool progress = true;
  bool print_cluster = false;
};

/// How simulate() runs: what changes the run, and what only watches it.
struct simulate_options {
  double speedup = 1.0;
  std::optional<uint64_t> shuffle_seed; // none: FIFO delivery
  std::string messages_path;            // empty: no message log (the hash is kept anyway)
  bool sequential = false;              // one request at a time (replay_driver.hpp)
  // Each record and its twin, one sent after prefill and one streamed (replay::kv_send_pairs):
  // twice the requests.
  bool kv_send_pairs = false;
  bool progress = false; // the progress bar on stderr
  // Sees every message of the replay as it is delivered, and its payload (null: none), with the
  // system that names senders, receivers and types (sim_system::payload_tap); empty: none.
  // For measures the report does not hold (crescent experiment replicas, scale).
  std::function<void(const sim_system&, const delivered_message&, const envelope*)> watch;
  // Broken on purpose (fault_injector.hpp): the plan, checked by up::check_sim_fault_plan, its
  // times counting from the replay's start; `fault_seed` draws the messages its faults take.
  up::fault_plan faults;
  uint64_t fault_seed = 1;
  // Called once every request has ended and the faults have stopped, before the cluster stops,
  // with the system and the cluster: to let it settle and audit it (crescent chaos).
  std::function<void(sim_system&, cluster&)> after;
};

struct simulation {
  sim_report report; // its trace, cluster and seed fields are the caller's to fill
  sim_wall wall;
  std::string faults_log;             // fault_injector::format_log (empty: no plan)
  std::vector<uint64_t> faults_taken; // by plan index
};

/// Prompts as the cluster says (trace_block_tokens): at the trace's lengths on the paper cluster,
/// scaled to the small model as `crescent run` does by default, so that a simulated run of the
/// reference cluster compares with a real one.
replay::workload_options workload_for(const cluster_config& cfg, double speedup);

/// Replays `records` through a cluster brought up from `cfg` in simulated time, and measures.
/// Errors: bring-up (a bad config), an unwritable message log, a run that stalls.
caf::expected<simulation> simulate(cluster_config cfg, std::vector<replay::trace_record> records,
                                   const simulate_options& opt);

/// Exit status as `crescent run`: 0 when every request completed or was rejected, 1 when any
/// failed, 2 when the replay could not start (a bad flag, cluster file or trace line).
int replay_command(const replay_options& opt);

} // namespace crescent::sim
