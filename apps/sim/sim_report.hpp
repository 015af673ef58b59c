// What `crescent replay --sim` reports: the summary of `crescent run`, plus the paper's measures
// (SLO attainment and effective requests, hit rate by tier, prefill GPU time), why requests were
// rejected or failed, the modeled links' use, and the message stream's hash.
//
// Everything here is decided by the simulation, so the JSON form is byte-identical run after
// run; what the machine decides (wall time, speed, peak memory) is kept apart (sim_wall) and
// printed, never written into the JSON.
#pragma once

#include "apps/replay/report.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace crescent::sim {

/// The paper's SLOs: TTFT 30 s; TBT thresholds I, II, III of 100, 200 and 300 ms. A replay uses
/// its cluster's TTFT SLO and adds its TBT SLO to the thresholds.
struct slo_thresholds {
  double ttft_ms = 30'000;
  std::vector<double> tbt_ms{100, 200, 300};
};

/// One node's modeled links.
struct link_report {
  uint32_t node = 0;
  uint64_t nic_out_bytes = 0, nic_in_bytes = 0, local_bytes = 0;
  uint64_t nic_out_busy_ns = 0, nic_in_busy_ns = 0, local_busy_ns = 0;
  uint64_t ssd_read_bytes = 0, ssd_write_bytes = 0; // modeled bytes read back, offloaded
  uint64_t ssd_read_busy_ns = 0, ssd_write_busy_ns = 0;
};

struct sim_report {
  std::string trace;
  std::string cluster; // "built-in paper cluster" or the file
  uint64_t seed = 0;
  std::optional<uint64_t> shuffle_seed; // none: FIFO delivery
  double speedup = 1;
  // The cluster's instances are coupled (docs/coupled.md): no KV hand-off, and what is reused
  // comes from each instance's own KV memory, not from a pool.
  bool coupled = false;
  replay::replay_summary summary;
  slo_thresholds slo;
  size_t requests = 0;
  size_t ttft_met = 0;           // completed with TTFT within its SLO
  std::vector<size_t> tbt_met;   // per TBT threshold
  std::vector<size_t> effective; // both met, per TBT threshold
  bool ssd = false;              // some node has an SSD tier
  size_t pulls = 0;              // completed requests that read cached blocks from another node
  uint64_t replicas_added = 0;   // copies of pulled blocks made on the nodes that pulled them
  double prefill_gpu_s_mean = 0; // per completed request
  // The KV hand-off's overlap with compute (request_result::kv_hidden), over completed
  // requests of at least long_prompt_tokens and over all of them.
  static constexpr uint32_t long_prompt_tokens = 8192;
  size_t long_prompts = 0;
  double long_hidden_min = 1, long_hidden_mean = 0;
  size_t long_hidden_90 = 0; // of them, those with at least 90% hidden (issue 17's target)
  // Of them, those that computed long_prompt_tokens or more: their transfer has compute to hide
  // behind (one found (almost) whole in the pool sends more than its load and compute take).
  size_t long_computing = 0, long_computing_hidden_90 = 0;
  double long_computing_hidden_min = 1;
  double kv_tail_ms_mean = 0;
  std::map<std::string, size_t> rejected, failed; // by reason
  double trace_span_s = 0;  // from the first arrival to the last (after the speedup)
  double virtual_end_s = 0; // when the last request ended
  std::vector<link_report> links;
  uint64_t messages = 0;
  uint64_t message_hash = 0;
  std::vector<replay::request_result> results; // in id order
};

/// What the machine decided: not part of the JSON.
struct sim_wall {
  double wall_s = 0;
  uint64_t peak_rss_bytes = 0;
};

/// Fills the measures from the results (sorted by id here).
void measure(sim_report& r, std::vector<replay::request_result> results);

std::string format_text(const sim_report& r, const sim_wall& wall);

/// The report and one record per request (arrival, TTFT, TBT, instances, tokens), as JSON.
std::string format_json(const sim_report& r);

/// Peak resident memory of this process so far.
uint64_t peak_rss_bytes();

} // namespace crescent::sim
