#include "actors/conductor/time_model.hpp"

#include "gpu/least_squares.hpp"
#include "messages/errors.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <set>

namespace crescent {

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

// What a prefill worker's chunks cost by the source: the tokens after the reused ones, in
// chunks, each call on the cached prefix before it.
double chunked_prefill_ns(const time_model_source& src, uint32_t prompt, uint32_t reused,
                          uint32_t chunk) {
  double sum = 0;
  for (uint32_t at = reused; at < prompt; at += chunk)
    sum += static_cast<double>(src.prefill_call_ns(at, std::min(chunk, prompt - at)));
  return sum;
}

// Prompt lengths and reused shares that span what a cluster meets, up to its context limit.
std::vector<std::pair<uint32_t, uint32_t>> fit_grid(uint32_t context) {
  std::set<uint32_t> prompts;
  for (uint32_t n = 1; n < context; n *= 2)
    prompts.insert(n);
  prompts.insert(context);
  for (uint32_t n : {3u, 100u, 700u, 3000u, 12000u, 40000u, 150000u})
    if (n < context)
      prompts.insert(n);
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (auto p : prompts)
    for (double share : {0.0, 0.25, 0.5, 0.75, 0.95})
      out.emplace_back(p, std::min(p - 1, static_cast<uint32_t>(share * p)));
  return out;
}

} // namespace

std::array<double, time_model::feature_count> time_model::features(uint32_t prompt, uint32_t reused,
                                                                   uint32_t chunk) {
  const double n = static_cast<double>(prompt - reused);
  const double r = static_cast<double>(reused);
  const double chunks = static_cast<double>(ceil_div(prompt - reused, chunk));
  return {chunks, n, n * n, n * r, chunks * r};
}

time_model_source source_of(std::shared_ptr<const gpu::modeled_profile> profile,
                            const gpu::model_config& model) {
  time_model_source src;
  src.name = profile->name;
  src.prefill_call_ns = [profile](uint64_t cached, uint64_t tokens) {
    return gpu::modeled_prefill_ns(*profile, cached, tokens);
  };
  const uint64_t kv = model.kv_bytes_per_token();
  src.decode_step_ns = [profile, kv](uint32_t batch, uint64_t context) {
    return gpu::modeled_decode_ns(*profile, batch, static_cast<double>(context + batch), kv);
  };
  src.h2d_bytes_per_s = profile->h2d_bytes_per_s;
  src.nic_bytes_per_s = profile->nic_bytes_per_s;
  src.nic_latency_s = profile->nic_latency_s;
  src.ssd_read_bytes_per_s = profile->ssd_read_bytes_per_s;
  src.ssd_latency_s = profile->ssd_latency_s;
  return src;
}

caf::expected<time_model> time_model::fit(time_model_source source, const gpu::model_config& model,
                                          uint32_t chunk_tokens) {
  if (!source.prefill_call_ns || !source.decode_step_ns)
    return make_error(errc::bad_config, "the conductor's time model needs the engine's costs");
  if (chunk_tokens == 0)
    return make_error(errc::bad_config, "prefill.chunk_tokens must be positive");
  if (!(source.h2d_bytes_per_s > 0) || !(source.nic_bytes_per_s > 0))
    return make_error(errc::bad_config, "the conductor's time model needs link bandwidths");
  time_model m;
  m.chunk_tokens_ = chunk_tokens;
  m.block_tokens_ = model.block_tokens;
  m.page_bytes_ = model.page_bytes();
  m.pool_block_bytes_ = m.page_bytes_;
  m.handoff_page_bytes_ = m.page_bytes_;
  std::vector<std::vector<double>> rows;
  std::vector<double> times;
  for (auto [prompt, reused] : fit_grid(model.context_tokens_max)) {
    const double t = chunked_prefill_ns(source, prompt, reused, chunk_tokens);
    if (t <= 0)
      continue;
    const auto x = features(prompt, reused, chunk_tokens);
    rows.emplace_back(x.begin(), x.end());
    times.push_back(t);
  }
  auto fitted = gpu::fit_nonnegative(rows, times);
  if (!fitted)
    return std::move(fitted.error());
  m.coefficients_ = std::move(fitted->coefficients);
  m.fit_error_ = fitted->rms_relative_error;
  m.source_ = std::move(source);
  return m;
}

uint64_t time_model::prefill_ns(uint32_t prompt_tokens, uint32_t reused_tokens) const {
  if (prompt_tokens == 0)
    return 0;
  reused_tokens = std::min(reused_tokens, prompt_tokens - 1);
  const auto x = features(prompt_tokens, reused_tokens, chunk_tokens_);
  double t = 0;
  for (size_t j = 0; j < x.size(); ++j)
    t += coefficients_[j] * x[j];
  t = std::max(0.0, t);
  if (stages_ > 1 && source_.prefill_call_ns) {
    // The pipeline: every chunk passes each stage, a stage holding 1/stages of the layers, so
    // it ends about t/stages after it starts plus the slowest chunk's time through the other
    // stages: the last, or the last whole one before it (attention over a longer prefix costs
    // more, so it is one of those two).
    const uint32_t computed = prompt_tokens - reused_tokens;
    const uint32_t last = (computed - 1) % chunk_tokens_ + 1;
    double slowest_ns = static_cast<double>(source_.prefill_call_ns(prompt_tokens - last, last));
    if (computed > last)
      slowest_ns = std::max(slowest_ns, static_cast<double>(source_.prefill_call_ns(
                                            prompt_tokens - last - chunk_tokens_, chunk_tokens_)));
    t = (t + (stages_ - 1) * std::min(t, slowest_ns)) / stages_;
    // The other stages first read their layers of the cached prefix from the head, whose NIC
    // sends the whole prefix to decode at the same time.
    const double prefix_bytes = static_cast<double>(reused_tokens / block_tokens_ * page_bytes_);
    t += prefix_bytes * (2.0 * stages_ - 1) / stages_ / source_.nic_bytes_per_s * 1e9;
  }
  return static_cast<uint64_t>(std::llround(t * correction_));
}

void time_model::set_pipeline(uint32_t stages) {
  assert(stages >= 1);
  stages_ = stages;
}

void time_model::set_pool_block_bytes(uint64_t bytes) {
  assert(bytes > 0);
  pool_block_bytes_ = bytes;
}

void time_model::set_handoff_page_bytes(uint64_t bytes) {
  assert(bytes > 0);
  handoff_page_bytes_ = bytes;
}

uint64_t time_model::load_ns(uint32_t blocks, bool remote) const {
  if (blocks == 0)
    return 0;
  const auto& p = source_;
  const double bytes = static_cast<double>(blocks) * static_cast<double>(pool_block_bytes_);
  const double s = remote ? bytes / p.nic_bytes_per_s + p.nic_latency_s : bytes / p.h2d_bytes_per_s;
  return static_cast<uint64_t>(std::llround(s * 1e9));
}

uint64_t time_model::ssd_read_ns(uint32_t blocks) const {
  const auto& p = source_;
  if (blocks == 0 || !(p.ssd_read_bytes_per_s > 0))
    return 0;
  const double bytes = static_cast<double>(blocks) * static_cast<double>(pool_block_bytes_);
  return static_cast<uint64_t>(
      std::llround((bytes / p.ssd_read_bytes_per_s + p.ssd_latency_s) * 1e9));
}

double time_model::bandwidth(uint32_t from, uint32_t to) const {
  const size_t k = size_t{from} * nodes_max + to;
  if (from < nodes_max && to < nodes_max && k < pair_bytes_per_s_.size() &&
      pair_bytes_per_s_[k] > 0)
    return pair_bytes_per_s_[k];
  return source_.nic_bytes_per_s;
}

uint64_t time_model::pull_ns(uint32_t blocks, uint32_t from, uint32_t to,
                             uint64_t backlog_bytes) const {
  if (blocks == 0)
    return 0;
  const double bytes = static_cast<double>(blocks) * static_cast<double>(pool_block_bytes_) +
                       static_cast<double>(backlog_bytes);
  return static_cast<uint64_t>(
      std::llround((bytes / bandwidth(from, to) + source_.nic_latency_s) * 1e9));
}

void time_model::learn_transfer(uint32_t from, uint32_t to, uint64_t bytes, uint64_t ns) {
  const double s = static_cast<double>(ns) / 1e9 - source_.nic_latency_s;
  if (from >= nodes_max || to >= nodes_max || bytes == 0 || !(s > 0))
    return;
  // Bounded to a sane range: one odd sample must not make a link look free or dead.
  const double sample = std::clamp(static_cast<double>(bytes) / s, 1e6, 1e13);
  if (pair_bytes_per_s_.empty())
    pair_bytes_per_s_.assign(size_t{nodes_max} * nodes_max, 0.0);
  auto& bw = pair_bytes_per_s_[size_t{from} * nodes_max + to];
  if (!(bw > 0))
    bw = source_.nic_bytes_per_s; // from what was assumed: a first sample moves it 1/8
  bw += (sample - bw) / 8.0;
}

time_model::handoff_estimate time_model::handoff(uint32_t prompt_tokens, uint64_t compute_ns,
                                                 uint64_t load_ns, uint32_t load_blocks) const {
  const auto& p = source_;
  const uint32_t pages = ceil_div(prompt_tokens, block_tokens_);
  const double page_s = static_cast<double>(handoff_page_bytes_) / p.nic_bytes_per_s;
  const double all_s = pages * page_s;
  double send_s = all_s;
  double burst_s = all_s;
  if (prompt_tokens >= stream_min_tokens_ && prompt_tokens > 0) {
    // The last step sends its layers of the pages that the last chunk wrote, which starts
    // after the reused prefix (the prompt's last token is always computed).
    const uint32_t reused = static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t{load_blocks} * block_tokens_, prompt_tokens - 1));
    const uint32_t last_chunk = (prompt_tokens - reused - 1) % chunk_tokens_ + 1;
    const uint32_t last_pages = pages - (prompt_tokens - last_chunk) / block_tokens_;
    // The first batch of the prefix's reads is all of its load that the hand-off waits for.
    const double first_batch =
        load_blocks == 0
            ? 1.0
            : static_cast<double>(std::min<uint64_t>(ceil_div(load_blocks, stream_load_batches_),
                                                     stream_load_batch_blocks_)) /
                  load_blocks;
    const double overlap_s =
        (static_cast<double>(compute_ns) + static_cast<double>(load_ns) * (1 - first_batch)) / 1e9;
    const double last_step_s = last_pages * page_s * stream_step_share_;
    send_s = std::max(last_step_s, all_s - overlap_s);
    // Held back by the link: its pages wait for the NIC from the first batch on.
    burst_s = all_s - overlap_s > last_step_s ? all_s : last_step_s;
  }
  return {static_cast<uint64_t>(std::llround((send_s + p.nic_latency_s) * 1e9)),
          static_cast<uint64_t>(std::llround(burst_s * 1e9))};
}

void time_model::set_streaming(uint32_t min_tokens, uint32_t step_layers, uint32_t layers,
                               uint32_t load_batches, uint64_t load_batch_blocks) {
  assert(step_layers >= 1 && layers >= 1 && load_batches >= 1 && load_batch_blocks >= 1);
  stream_min_tokens_ = min_tokens;
  stream_load_batches_ = load_batches;
  stream_load_batch_blocks_ = load_batch_blocks;
  stream_step_share_ = static_cast<double>(std::min(step_layers, layers)) / layers;
}

uint64_t time_model::decode_step_ns(uint32_t batch, uint64_t context_tokens) const {
  return batch == 0 ? 0 : source_.decode_step_ns(batch, context_tokens);
}

void time_model::correct(uint64_t predicted_ns, uint64_t actual_ns) {
  if (predicted_ns == 0 || actual_ns == 0)
    return;
  // The ratio against the uncorrected prediction, smoothed over about the last 32 reports.
  const double ratio =
      static_cast<double>(actual_ns) * correction_ / static_cast<double>(predicted_ns);
  correction_ = std::clamp(correction_ + (ratio - correction_) / 32.0, 0.1, 10.0);
}

} // namespace crescent
