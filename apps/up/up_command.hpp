// `crescent up CLUSTER.yaml`: a whole cluster that spans processes from one file. It starts a
// `crescent node` process for every node with an address (through the file's launcher), brings
// the cluster up in this process once they are ready, replays the workload, carries out a fault
// plan meanwhile (--faults), checks the invariants, and tears every process down, also on SIGINT
// or SIGTERM and when a start fails. Everything lands in the run directory: report.txt,
// faults.log, node-N.log (each node's log and transfer counters, and the KV slices its transfer
// faults took), processes.txt, the metadata.
// docs/faults.md.
#pragma once

#include "apps/run_command.hpp"

#include <string>
#include <vector>

namespace crescent::cli {

struct up_options {
  std::string cluster_path;
  std::string faults_path; // empty: no faults
  std::string run_dir;     // empty: crescent-up-<seconds since the epoch> here
  bool netns = false;      // node processes in network namespaces (apps/up/netns.hpp)
  uint32_t link_mbit = 0;  // with netns: each node's link limited to this; 0: unlimited
  uint64_t seed = 1;       // of the transfer faults' draws (each process's own, from this)
  run_options run;         // the workload, as crescent run's (its config_path is cluster_path);
                           // run.kv_send ab: four bring-ups, sent after and streamed in turn
};

/// What a run that got as far as its report found (for crescent bench faults).
struct up_result {
  std::vector<replay::request_result> results;
  std::vector<std::string> violations; // of the invariants and the settled audit
  size_t faults_injected = 0;
};

/// Exit status as crescent run: 0 when every request completed or was rejected and the
/// invariants held, 1 when a request failed or an invariant did not hold, 2 when the run could
/// not start (a bad flag, file or plan, a node that did not start or join), 130 on SIGINT.
/// `out`, when given, receives what the run found (untouched when it did not start).
int up_command(const up_options& opt, up_result* out = nullptr);

} // namespace crescent::cli
