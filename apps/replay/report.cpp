#include "apps/replay/report.hpp"

#include "messages/checked_read.hpp"
#include "messages/schema/request.capnp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace crescent::replay {

std::vector<std::pair<size_t, std::string>>
failures_by_reason(const std::vector<request_result>& results) {
  std::map<std::string, size_t> by_reason;
  for (const auto& r : results)
    if (r.status == outcome_status::failed)
      ++by_reason[r.reason];
  std::vector<std::pair<size_t, std::string>> rows;
  for (auto& [reason, n] : by_reason)
    rows.emplace_back(n, reason);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return rows;
}

percentiles percentiles_of(std::vector<double>& values) {
  percentiles p;
  p.count = values.size();
  if (values.empty())
    return p;
  std::sort(values.begin(), values.end());
  auto rank = [&](double q) {
    auto i = static_cast<size_t>(std::ceil(q * values.size()));
    return values[std::clamp<size_t>(i, 1, values.size()) - 1];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  return p;
}

double request_tbt_ms(const std::vector<int64_t>& t) {
  if (t.size() < 2)
    return -1;
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i)
    gaps.push_back(static_cast<double>(t[i] - t[i - 1]) / 1e6);
  std::sort(gaps.begin(), gaps.end(), std::greater<>());
  const size_t n = std::max<size_t>(1, gaps.size() / 10);
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += gaps[i];
  return sum / static_cast<double>(n);
}

namespace {

// How well the conductor predicted each completed request's TTFT at placement.
void measure_predictions(replay_summary& s, const std::vector<request_result>& results) {
  std::vector<double> abs_ms;
  double relative = 0;
  for (const auto& x : results) {
    if (x.status != outcome_status::completed || x.predicted_ttft_ns == 0 ||
        x.token_times_ns.empty())
      continue;
    const double actual = static_cast<double>(x.token_times_ns.front() - x.arrival_ns);
    const double error = std::abs(static_cast<double>(x.predicted_ttft_ns) - actual);
    abs_ms.push_back(error / 1e6);
    relative += actual > 0 ? error / actual : 0;
  }
  s.predicted = abs_ms.size();
  if (abs_ms.empty())
    return;
  s.ttft_mape = relative / static_cast<double>(abs_ms.size());
  s.ttft_p90_abs_error_ms = percentiles_of(abs_ms).p90;
}

} // namespace

request_result decode_outcome(const typed_envelope<wire::RequestOutcome>& msg, uint64_t id,
                              uint32_t prompt_tokens) {
  auto r = read_as<wire::RequestOutcome>(msg, [&](wire::RequestOutcome::Reader in) {
    request_result out;
    out.id = in.getRequestId();
    switch (in.getStatus()) {
    case wire::Status::COMPLETED:
      out.status = outcome_status::completed;
      break;
    case wire::Status::REJECTED:
      out.status = outcome_status::rejected;
      break;
    default:
      out.status = outcome_status::failed;
      break;
    }
    out.reason = in.getReason();
    out.arrival_ns = in.getArrivalNs();
    out.token_times_ns = to_vector(in.getTokenTimesNs());
    out.tokens = to_vector(in.getTokens());
    out.computed_tokens = in.getComputedTokens();
    out.reused_tokens = in.getReusedTokens();
    out.remote_reused_tokens = in.getRemoteReusedTokens();
    out.ssd_reused_tokens = in.getSsdReusedTokens();
    out.load_misses = in.getLoadMisses();
    out.prefill_instance = in.getPrefillInstance();
    out.decode_instance = in.getDecodeInstance();
    out.prefill_compute_ns = in.getPrefillComputeNs();
    out.kv_tail_ns = in.getKvTailNs();
    out.kv_busy_ns = in.getKvBusyNs();
    out.prefill_queue_ns = in.getPrefillQueueNs();
    out.stage_compute_ns = to_vector(in.getStageComputeNs());
    out.pulled_from = to_vector(in.getPulledFrom());
    out.predicted_ttft_ns = in.getPredictedTtftNs();
    out.retry_after_ms = in.getRetryAfterMs();
    out.retries = in.getRetries();
    return out;
  });
  if (!r) {
    request_result bad;
    bad.id = id;
    bad.prompt_tokens = prompt_tokens;
    bad.reason = "unreadable outcome: " + describe(r.error());
    return bad;
  }
  r->prompt_tokens = prompt_tokens;
  return std::move(*r);
}

double mean_ttft_ms(const std::vector<request_result>& results) {
  double sum = 0;
  size_t n = 0;
  for (const auto& r : results)
    if (r.status == outcome_status::completed && !r.token_times_ns.empty()) {
      sum += static_cast<double>(r.token_times_ns.front() - r.arrival_ns) / 1e6;
      ++n;
    }
  return n == 0 ? 0 : sum / static_cast<double>(n);
}

replay_summary summarize(const std::vector<request_result>& results) {
  replay_summary s;
  std::vector<double> ttft, tbt;
  for (const auto& r : results) {
    switch (r.status) {
    case outcome_status::completed:
      ++s.completed;
      break;
    case outcome_status::rejected:
      ++s.rejected;
      break;
    case outcome_status::failed:
      ++s.failed;
      break;
    }
    if (r.retries > 0) {
      ++s.retried;
      s.retried_completed += r.status == outcome_status::completed ? 1 : 0;
    }
    if (r.status != outcome_status::completed)
      continue;
    s.prompt_tokens += r.prompt_tokens;
    s.computed_tokens += r.computed_tokens;
    s.reused_tokens += r.reused_tokens;
    s.remote_reused_tokens += r.remote_reused_tokens;
    s.ssd_reused_tokens += r.ssd_reused_tokens;
    s.load_misses += r.load_misses;
    if (!r.token_times_ns.empty())
      ttft.push_back(static_cast<double>(r.token_times_ns.front() - r.arrival_ns) / 1e6);
    if (auto v = request_tbt_ms(r.token_times_ns); v >= 0)
      tbt.push_back(v);
  }
  s.ttft_ms = percentiles_of(ttft);
  s.tbt_ms = percentiles_of(tbt);
  measure_predictions(s, results);
  return s;
}

std::string format_summary(const replay_summary& s) {
  std::string out;
  out += fmt::format("requests      completed {}  rejected {}  failed {}\n", s.completed,
                     s.rejected, s.failed);
  if (s.retried > 0)
    out += fmt::format("retried       {} requests placed again after a failed attempt, {} of "
                       "them completed (request_retries_max)\n",
                       s.retried, s.retried_completed);
  out += fmt::format("TTFT ms       p50 {:.2f}  p90 {:.2f}  p99 {:.2f}   ({} requests)\n",
                     s.ttft_ms.p50, s.ttft_ms.p90, s.ttft_ms.p99, s.ttft_ms.count);
  out += fmt::format("TBT ms        p50 {:.2f}  p90 {:.2f}  p99 {:.2f}   (per request: mean of "
                     "its longest 10% of token intervals; {} requests)\n",
                     s.tbt_ms.p50, s.tbt_ms.p90, s.tbt_ms.p99, s.tbt_ms.count);
  auto share = [&](uint64_t tokens) {
    return s.prompt_tokens == 0 ? 0.0 : 100.0 * static_cast<double>(tokens) / s.prompt_tokens;
  };
  out += fmt::format("prefix hits   {:.1f}% of prompt tokens reused from the KV pool (local DRAM "
                     "{:.1f}%, remote DRAM {:.1f}%, SSD {:.1f}%)\n",
                     100.0 * s.hit_rate(), share(s.local_reused_tokens()),
                     share(s.remote_reused_tokens), share(s.ssd_reused_tokens));
  out += fmt::format("prefill       {} tokens computed, {} reused, {} pool blocks missed\n",
                     s.computed_tokens, s.reused_tokens, s.load_misses);
  out += fmt::format("predicted     TTFT MAPE {:.1f}%, p90 absolute error {:.2f} ms (the "
                     "conductor's, at placement; {} requests)\n",
                     100 * s.ttft_mape, s.ttft_p90_abs_error_ms, s.predicted);
  return out;
}

} // namespace crescent::replay
