#include "apps/experiment/measures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace crescent::experiment {

cluster_config with_split(cluster_config cfg, uint32_t nodes, uint32_t prefill) {
  cfg.nodes.assign(nodes, cfg.nodes.front());
  for (uint32_t i = 0; i < nodes; ++i) {
    cfg.nodes[i].prefill_instances = i < prefill ? 1 : 0;
    cfg.nodes[i].decode_instances = i < prefill ? 0 : 1;
  }
  return cfg;
}

double mean_ttft_ms(const sim::sim_report& r) {
  return replay::mean_ttft_ms(r.results);
}

size_t effective_at(const sim::sim_report& r, double tbt_ms) {
  const auto& t = r.slo.tbt_ms;
  const auto i = std::find(t.begin(), t.end(), tbt_ms);
  const auto k = static_cast<size_t>(i - t.begin());
  return k < r.effective.size() ? r.effective[k] : 0;
}

size_t placed(const sim::sim_report& r) {
  return static_cast<size_t>(std::count_if(r.results.begin(), r.results.end(),
                                           [](const auto& x) { return x.predicted_ttft_ns > 0; }));
}

double rounded(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

json run_summary(const sim::sim_report& r) {
  const auto& s = r.summary;
  json effective = json::object();
  for (size_t k = 0; k < r.slo.tbt_ms.size(); ++k)
    effective[fmt::format("{:.0f}", r.slo.tbt_ms[k])] = r.effective[k];
  const double remote = s.prompt_tokens == 0 ? 0.0
                                             : static_cast<double>(r.summary.remote_reused_tokens) /
                                                   static_cast<double>(s.prompt_tokens);
  json j;
  j["requests"] = r.requests;
  j["completed"] = s.completed;
  j["rejected"] = s.rejected;
  j["failed"] = s.failed;
  j["ttft_ms"] = {{"mean", rounded(mean_ttft_ms(r), 3)},
                  {"p50", rounded(s.ttft_ms.p50, 3)},
                  {"p90", rounded(s.ttft_ms.p90, 3)},
                  {"p99", rounded(s.ttft_ms.p99, 3)}};
  j["tbt_ms"] = {{"p50", rounded(s.tbt_ms.p50, 3)}, {"p90", rounded(s.tbt_ms.p90, 3)}};
  j["rejected_by_reason"] = r.rejected;
  j["ttft_slo_ms"] = r.slo.ttft_ms;
  j["effective_by_tbt_ms"] = effective;
  j["hit_rate"] = rounded(s.hit_rate(), 6);
  j["hit_rate_remote"] = rounded(remote, 6);
  j["prefill_gpu_s_mean"] = rounded(r.prefill_gpu_s_mean, 6);
  j["virtual_end_s"] = rounded(r.virtual_end_s, 3);
  return j;
}

std::string percent(double share) {
  return fmt::format("{:.1f}%", 100 * share);
}

std::string relative(double x, double reference) {
  if (reference == 0)
    return "n/a";
  return fmt::format("{:+.1f}%", 100 * (x / reference - 1));
}

std::vector<replay::trace_record> with_outputs(std::vector<replay::trace_record> trace,
                                               uint32_t tokens) {
  for (auto& r : trace)
    r.output_tokens = tokens;
  return trace;
}

bool is_shipped_synthetic_trace(const std::vector<replay::trace_record>& trace) {
  uint64_t prompt = 0;
  for (const auto& r : trace)
    prompt += r.input_tokens;
  return trace.size() == 3993 && prompt == 61'194'628;
}

} // namespace crescent::experiment
