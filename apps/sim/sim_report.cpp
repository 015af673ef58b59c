#include "apps/sim/sim_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>

namespace crescent::sim {

namespace {

using replay::outcome_status;
using replay::request_result;

double ttft_ms(const request_result& r) {
  return r.token_times_ns.empty()
             ? -1
             : static_cast<double>(r.token_times_ns.front() - r.arrival_ns) / 1e6;
}

double share(size_t part, size_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// Reasons are grouped by their text up to the first digit, so that "request 17 ..." and
// "request 18 ..." count as one.
std::string reason_group(const std::string& reason) {
  auto cut = reason.find_first_of("0123456789");
  auto group = reason.substr(0, cut == std::string::npos ? reason.size() : cut);
  while (!group.empty() && (group.back() == ' ' || group.back() == ':'))
    group.pop_back();
  return group.empty() ? reason : group;
}

// Completed requests that read cached blocks from another node: transfers chosen over
// recomputation.
size_t count_pulls(const std::vector<request_result>& results) {
  size_t n = 0;
  for (const auto& x : results)
    n += x.status == outcome_status::completed && x.remote_reused_tokens > 0 ? 1 : 0;
  return n;
}

} // namespace

void measure(sim_report& r, std::vector<request_result> results) {
  std::sort(results.begin(), results.end(), [](auto& a, auto& b) { return a.id < b.id; });
  r.summary = replay::summarize(results);
  r.requests = results.size();
  r.tbt_met.assign(r.slo.tbt_ms.size(), 0);
  r.effective.assign(r.slo.tbt_ms.size(), 0);
  double prefill_s = 0;
  int64_t first_arrival = INT64_MAX, last_arrival = INT64_MIN, end = INT64_MIN;
  for (const auto& x : results) {
    first_arrival = std::min(first_arrival, x.arrival_ns);
    last_arrival = std::max(last_arrival, x.arrival_ns);
    if (!x.token_times_ns.empty())
      end = std::max(end, x.token_times_ns.back());
    if (x.status == outcome_status::rejected)
      ++r.rejected[reason_group(x.reason)];
    if (x.status == outcome_status::failed)
      ++r.failed[reason_group(x.reason)];
    if (x.status != outcome_status::completed)
      continue;
    prefill_s += static_cast<double>(x.prefill_compute_ns) / 1e9;
    r.kv_tail_ms_mean += static_cast<double>(x.kv_tail_ns) / 1e6;
    if (x.prompt_tokens >= sim_report::long_prompt_tokens) {
      ++r.long_prompts;
      const double hidden = x.kv_hidden();
      r.long_hidden_min = std::min(r.long_hidden_min, hidden);
      r.long_hidden_mean += hidden;
      r.long_hidden_90 += hidden >= 0.9 ? 1 : 0;
      if (x.computed_tokens >= sim_report::long_prompt_tokens) {
        ++r.long_computing;
        r.long_computing_hidden_90 += hidden >= 0.9 ? 1 : 0;
        r.long_computing_hidden_min = std::min(r.long_computing_hidden_min, hidden);
      }
    }
    const bool ttft_ok = ttft_ms(x) <= r.slo.ttft_ms;
    r.ttft_met += ttft_ok ? 1 : 0;
    const double tbt = replay::request_tbt_ms(x.token_times_ns); // -1: one token, no TBT
    for (size_t k = 0; k < r.slo.tbt_ms.size(); ++k) {
      const bool tbt_ok = tbt <= r.slo.tbt_ms[k];
      r.tbt_met[k] += tbt_ok ? 1 : 0;
      r.effective[k] += ttft_ok && tbt_ok ? 1 : 0;
    }
  }
  r.prefill_gpu_s_mean = r.summary.completed == 0 ? 0 : prefill_s / r.summary.completed;
  r.kv_tail_ms_mean = r.summary.completed == 0 ? 0 : r.kv_tail_ms_mean / r.summary.completed;
  r.long_hidden_mean = r.long_prompts == 0 ? 0 : r.long_hidden_mean / r.long_prompts;
  r.pulls = count_pulls(results);
  if (!results.empty()) {
    r.trace_span_s = static_cast<double>(last_arrival - first_arrival) / 1e9;
    r.virtual_end_s = static_cast<double>(std::max(end, last_arrival) - first_arrival) / 1e9;
  }
  r.results = std::move(results);
}

std::string format_text(const sim_report& r, const sim_wall& wall) {
  const auto& s = r.summary;
  std::string out = replay::format_summary(s);
  std::string tbt, eff;
  for (size_t k = 0; k < r.slo.tbt_ms.size(); ++k) {
    tbt += fmt::format("{}{:.0f} ms {:.1f}%", k == 0 ? "" : ", ", r.slo.tbt_ms[k],
                       share(r.tbt_met[k], r.requests));
    eff += fmt::format("{}{:.0f} ms {} ({:.1f}%)", k == 0 ? "" : ", ", r.slo.tbt_ms[k],
                       r.effective[k], share(r.effective[k], r.requests));
  }
  out += fmt::format("SLO           TTFT <= {:.0f} s: {:.1f}%; TBT <= {} (of {} requests)\n",
                     r.slo.ttft_ms / 1000, share(r.ttft_met, r.requests), tbt, r.requests);
  out += fmt::format("effective     both SLOs met, by TBT threshold: {}\n", eff);
  auto of_prompt = [&](uint64_t tokens) {
    return s.prompt_tokens == 0 ? 0.0 : static_cast<double>(tokens) / s.prompt_tokens;
  };
  if (r.coupled)
    out += fmt::format("hit rate      {:.4f} of prompt tokens, from the coupled instances' own KV "
                       "memory (no pool)\n",
                       s.hit_rate());
  else
    out += fmt::format("hit rate      {:.4f} of prompt tokens: local DRAM {:.4f}, remote DRAM "
                       "{:.4f}, SSD {}\n",
                       s.hit_rate(), of_prompt(s.local_reused_tokens()),
                       of_prompt(s.remote_reused_tokens),
                       r.ssd ? fmt::format("{:.4f}", of_prompt(s.ssd_reused_tokens))
                             : std::string{"(no SSD tier)"});
  out += fmt::format("prefill GPU   {:.3f} s per completed request ({})\n", r.prefill_gpu_s_mean,
                     r.coupled ? "its share of the steps that computed its prompt"
                               : "modeled compute");
  if (r.coupled)
    out += "KV hand-off   none: coupled instances decode where they prefill\n";
  else
    out += fmt::format(
        "KV hand-off   {:.2f} ms mean after compute; of prompts >= {} tokens ({}), "
        "{:.1f}% of the transfer hidden behind compute (least {:.1f}%), {} at 90% or "
        "more; of those computing >= {} tokens ({}), {} at 90% or more (least "
        "{:.1f}%)\n",
        r.kv_tail_ms_mean, sim_report::long_prompt_tokens, r.long_prompts, 100 * r.long_hidden_mean,
        100 * (r.long_prompts == 0 ? 0 : r.long_hidden_min), r.long_hidden_90,
        sim_report::long_prompt_tokens, r.long_computing, r.long_computing_hidden_90,
        100 * (r.long_computing == 0 ? 0 : r.long_computing_hidden_min));
  out += fmt::format("pulls         {} requests read cached blocks from another node; {} "
                     "blocks copied to the nodes that pulled them\n",
                     r.pulls, r.replicas_added);
  for (const auto& [reason, n] : r.rejected)
    out += fmt::format("rejected      {} x {}\n", n, reason);
  for (const auto& [reason, n] : r.failed)
    out += fmt::format("failed        {} x {}\n", n, reason);
  uint64_t nic = 0, local_bytes = 0, ssd_read = 0, ssd_write = 0;
  for (const auto& l : r.links) {
    nic += l.nic_out_bytes;
    local_bytes += l.local_bytes;
    ssd_read += l.ssd_read_bytes;
    ssd_write += l.ssd_write_bytes;
  }
  out +=
      fmt::format("KV moved      {:.1f} GB between nodes, {:.1f} GB within nodes (modeled links)\n",
                  nic / 1e9, local_bytes / 1e9);
  if (r.ssd)
    out += fmt::format("SSD           {:.1f} GB read back, {:.1f} GB offloaded (modeled drives)\n",
                       ssd_read / 1e9, ssd_write / 1e9);
  out +=
      fmt::format("messages      {} delivered, stream hash {:016x}\n", r.messages, r.message_hash);
  const double speed = wall.wall_s > 0 ? r.virtual_end_s / wall.wall_s : 0;
  out += fmt::format("simulated     {:.1f} s of virtual time (arrivals over {:.1f} s) in {:.2f} s "
                     "wall: {:.0f}x real time; peak RSS {:.0f} MiB\n",
                     r.virtual_end_s, r.trace_span_s, wall.wall_s, speed,
                     static_cast<double>(wall.peak_rss_bytes) / (1 << 20));
  return out;
}

namespace {

nlohmann::ordered_json request_json(const request_result& x) {
  nlohmann::ordered_json j;
  j["id"] = x.id;
  j["status"] = x.status == outcome_status::completed  ? "completed"
                : x.status == outcome_status::rejected ? "rejected"
                                                       : "failed";
  if (!x.reason.empty())
    j["reason"] = x.reason;
  j["arrival_ns"] = x.arrival_ns;
  j["ttft_ns"] = x.token_times_ns.empty() ? -1 : x.token_times_ns.front() - x.arrival_ns;
  j["predicted_ttft_ns"] = x.predicted_ttft_ns;
  if (x.retry_after_ms != 0)
    j["retry_after_ms"] = x.retry_after_ms;
  if (x.retries != 0)
    j["retries"] = x.retries;
  j["tbt_ms"] = replay::request_tbt_ms(x.token_times_ns);
  j["end_ns"] = x.token_times_ns.empty() ? -1 : x.token_times_ns.back() - x.arrival_ns;
  j["prefill_instance"] = x.prefill_instance;
  j["decode_instance"] = x.decode_instance;
  j["prompt_tokens"] = x.prompt_tokens;
  j["reused_tokens"] = x.reused_tokens;
  j["remote_reused_tokens"] = x.remote_reused_tokens;
  j["ssd_reused_tokens"] = x.ssd_reused_tokens;
  if (!x.pulled_from.empty())
    j["pulled_from"] = x.pulled_from; // the other nodes its reused blocks were read from
  j["computed_tokens"] = x.computed_tokens;
  j["output_tokens"] = x.tokens.size();
  j["prefill_compute_ns"] = x.prefill_compute_ns;
  j["kv_tail_ns"] = x.kv_tail_ns;
  j["kv_busy_ns"] = x.kv_busy_ns;
  j["prefill_queue_ns"] = x.prefill_queue_ns;
  j["load_misses"] = x.load_misses;
  if (!x.stage_compute_ns.empty())
    j["stage_compute_ns"] = x.stage_compute_ns; // a prefill group's job, per stage
  return j;
}

nlohmann::ordered_json percentiles_json(const replay::percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"count", p.count}};
}

} // namespace

std::string format_json(const sim_report& r) {
  const auto& s = r.summary;
  nlohmann::ordered_json j;
  j["format"] = "crescent-replay-report-1";
  j["trace"] = r.trace;
  j["cluster"] = r.cluster;
  j["seed"] = r.seed;
  j["coupled"] = r.coupled;
  j["delivery"] = r.shuffle_seed ? "shuffled" : "fifo";
  if (r.shuffle_seed)
    j["shuffle_seed"] = *r.shuffle_seed;
  else
    j["shuffle_seed"] = nullptr;
  j["speedup"] = r.speedup;
  j["requests"] = {{"total", r.requests},    {"completed", s.completed},
                   {"rejected", s.rejected}, {"failed", s.failed},
                   {"retried", s.retried},   {"retried_completed", s.retried_completed}};
  j["ttft_ms"] = percentiles_json(s.ttft_ms);
  j["tbt_ms"] = percentiles_json(s.tbt_ms);
  nlohmann::ordered_json slo;
  slo["ttft_ms"] = r.slo.ttft_ms;
  slo["ttft_met"] = r.ttft_met;
  slo["tbt_ms"] = r.slo.tbt_ms;
  slo["tbt_met"] = r.tbt_met;
  slo["effective"] = r.effective;
  j["slo"] = slo;
  j["tokens"] = {{"prompt", s.prompt_tokens},
                 {"reused", s.reused_tokens},
                 {"reused_remote", s.remote_reused_tokens},
                 {"reused_ssd", s.ssd_reused_tokens},
                 {"computed", s.computed_tokens},
                 {"load_misses", s.load_misses},
                 {"hit_rate", s.hit_rate()}};
  j["prefill_gpu_s_mean"] = r.prefill_gpu_s_mean;
  j["kv_handoff"] = {
      {"tail_ms_mean", r.kv_tail_ms_mean},
      {"long_prompt_tokens", sim_report::long_prompt_tokens},
      {"long_prompts", r.long_prompts},
      {"long_hidden_mean", r.long_hidden_mean},
      {"long_hidden_min", r.long_prompts == 0 ? 0.0 : r.long_hidden_min},
      {"long_hidden_90", r.long_hidden_90},
      {"long_computing", r.long_computing},
      {"long_computing_hidden_90", r.long_computing_hidden_90},
      {"long_computing_hidden_min", r.long_computing == 0 ? 0.0 : r.long_computing_hidden_min}};
  j["predictions"] = {{"requests", s.predicted},
                      {"ttft_mape", s.ttft_mape},
                      {"ttft_p90_abs_error_ms", s.ttft_p90_abs_error_ms},
                      {"pulls", r.pulls},
                      {"replicas_added", r.replicas_added}};
  j["rejected"] = r.rejected;
  j["failed"] = r.failed;
  j["trace_span_s"] = r.trace_span_s;
  j["virtual_end_s"] = r.virtual_end_s;
  auto links = nlohmann::ordered_json::array();
  for (const auto& l : r.links)
    links.push_back({{"node", l.node},
                     {"nic_out_bytes", l.nic_out_bytes},
                     {"nic_in_bytes", l.nic_in_bytes},
                     {"local_bytes", l.local_bytes},
                     {"nic_out_busy_ns", l.nic_out_busy_ns},
                     {"nic_in_busy_ns", l.nic_in_busy_ns},
                     {"local_busy_ns", l.local_busy_ns},
                     {"ssd_read_bytes", l.ssd_read_bytes},
                     {"ssd_write_bytes", l.ssd_write_bytes},
                     {"ssd_read_busy_ns", l.ssd_read_busy_ns},
                     {"ssd_write_busy_ns", l.ssd_write_busy_ns}});
  j["links"] = links;
  j["messages"] = {{"delivered", r.messages}, {"hash", fmt::format("{:016x}", r.message_hash)}};
  auto records = nlohmann::ordered_json::array();
  for (const auto& x : r.results)
    records.push_back(request_json(x));
  j["per_request"] = records;
  // Paths in the report may hold any bytes: replace what is not UTF-8 rather than throw.
  return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

uint64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

} // namespace crescent::sim
