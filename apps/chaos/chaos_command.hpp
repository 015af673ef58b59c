// `crescent chaos`: seeded fault campaigns in simulated time (docs/faults.md). Each seed draws a
// fault plan from a budget (fault_budget.hpp), replays the head of a trace through a small
// cluster of the reference engine under it, lets the cluster settle, and checks the invariants:
//   - every request ended with one outcome (completed, rejected, or failed with a reason);
//   - every completed request decoded the tokens of a monolithic run of the reference engine;
//   - no decode reservation outlives its request once the cluster settled;
//   - after the faults stopped, the conductor counts every node that was not killed as live.
// A failing seed prints its plan, its violations, the one command that runs it again, and the
// message trace of that run's end (written out in full as chaos-seed-S.messages). The campaign
// ends with the rare paths its seeds reached: for each code probe of the sources
// (actors/common/code_probe.hpp), in how many seeds, so that a path none reached is named.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "apps/chaos/fault_budget.hpp"
#include "apps/replay/report.hpp"
#include "apps/replay/trace.hpp"
#include "apps/replay/workload.hpp"
#include "apps/up/fault_plan.hpp"
#include "apps/up/invariants.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crescent {
class cluster;
namespace sim {
class sim_system;
} // namespace sim
} // namespace crescent

namespace crescent::chaos {

struct chaos_options {
  uint64_t seeds = 100;
  uint64_t first = 1;
  uint32_t requests = 200;
  std::string budget_path;  // --faults; empty: the default budget
  std::string cluster_path; // empty: the embedded default cluster (reference engine)
  std::string trace_path;
  double speedup = 4.0;
  std::string out_dir = "."; // where a failing seed's message trace goes
  bool verbose = false;      // a line per seed
  bool faults_log = false;   // each seed's fault log: what each fault took, when
  uint32_t jobs = 1;         // processes running seeds side by side
};

/// What every seed of a campaign shares: the cluster, the requests, their reference tokens.
struct campaign {
  cluster_config cfg;
  fault_budget budget;
  std::vector<replay::trace_record> records;
  std::vector<replay::synthetic_request> requests;
  uint64_t span_ms = 0; // arrivals span this long
  up::reference_cache reference;
  chaos_options options;
};

/// The cluster a campaign runs without --cluster: the embedded default (2 prefill nodes, 2
/// decode nodes, the reference engine) with a model of half the width (d_model 32, 2 heads, 1
/// KV head, ffn 64; 2 layers still), 8 MiB pools and 16 MiB of decode KV memory.
cluster_config chaos_cluster();

/// Loads the cluster, the budget and the trace head; errors name what is wrong.
caf::expected<campaign> prepare_campaign(const chaos_options& opt);

struct seed_result {
  uint64_t seed = 0;
  up::fault_plan plan;
  uint64_t message_hash = 0;
  uint64_t messages = 0;
  size_t completed = 0, rejected = 0, failed = 0;
  std::vector<std::string> violations;
  std::vector<uint64_t> requests_violated; // named by the violations, each once
  std::string faults_log;
  std::vector<uint64_t> faults_taken;          // by plan index
  std::vector<replay::request_result> results; // by id
  // Whether the run reached each code probe (actors/common/code_probe.hpp), by its index.
  std::vector<bool> probes;
  bool held() const { return violations.empty(); }
};

/// Runs one seed; `messages_path` (non-empty) writes its message trace.
seed_result run_seed(campaign& c, uint64_t seed, const std::string& messages_path = "");

/// Runs `plan` (checked by up::check_sim_fault_plan) as a seed would; `seed` draws the messages
/// its faults take.
seed_result run_plan(campaign& c, const up::fault_plan& plan, uint64_t seed,
                     const std::string& messages_path = "");

/// After a simulated run's last request (simulate_options::after): lets every timeout that
/// releases something run out, then audits the cluster once (up::audit_once, the nodes `plan`
/// kills excepted); what does not hold goes to `violations`, one line each.
void settle_and_audit(sim::sim_system& sim, cluster& cl, const up::fault_plan& plan,
                      std::vector<std::string>& violations);

/// The command that runs `seed` of this campaign alone.
std::string reproduce_command(const chaos_options& opt, uint64_t seed);

/// Exit status: 0 when every seed held, 1 when one did not, 2 when the campaign could not start.
int chaos_command(const chaos_options& opt);

} // namespace crescent::chaos
