#include "gpu/modeled_profile.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <span>
#include <string>
#include <tuple>
#include <utility>

namespace crescent::gpu {

namespace {

caf::error field_error(const std::string& field, const std::string& what) {
  return make_error(errc::bad_config, "profile." + field + ": " + what);
}

caf::error in_range(const char* field, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi)
    return {};
  return field_error(field, std::to_string(value) + " is not in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
}

// A field, its value and the range it must lie in.
using field_range = std::tuple<const char*, double, double, double>;

// The first field out of its range, or none.
caf::error in_ranges(std::span<const field_range> fields) {
  for (const auto& [field, value, lo, hi] : fields)
    if (auto err = in_range(field, value, lo, hi))
      return err;
  return {};
}

// A modeled duration in seconds to the nearest nanosecond (nearest, not up: a sum of terms
// that is a whole number of nanoseconds must not gain one from rounding noise).
uint64_t to_ns(double seconds) {
  const double ns = std::floor(seconds * 1e9 + 0.5);
  return ns <= 0 ? 0 : ns >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(ns);
}

} // namespace

namespace {

caf::error validate_fit(const modeled_profile& p) {
  const std::array<std::pair<const char*, double>, 9> fit = {{
      {"fit.prefill_base_ns", p.prefill_base_ns},
      {"fit.prefill_per_cached_token_ns", p.prefill_per_cached_token_ns},
      {"fit.prefill_per_token_ns", p.prefill_per_token_ns},
      {"fit.prefill_per_key_ns", p.prefill_per_key_ns},
      {"fit.decode_base_ns", p.decode_base_ns},
      {"fit.decode_per_sequence_ns", p.decode_per_sequence_ns},
      {"fit.decode_per_context_token_ns", p.decode_per_context_token_ns},
      {"fit.prefill_fit_error", p.prefill_fit_error},
      {"fit.decode_fit_error", p.decode_fit_error},
  }};
  for (const auto& [field, value] : fit)
    if (auto err = in_range(field, value, 0, 1e12))
      return err;
  const std::array<field_range, 4> links = {{
      {"kv_element_bytes", double(p.kv_element_bytes), 1, 4},
      {"h2d_bytes_per_s", p.h2d_bytes_per_s, 1e6, 1e14},
      {"nic_bytes_per_s", p.nic_bytes_per_s, 1e6, 1e14},
      {"nic_latency_s", p.nic_latency_s, 0, 1},
  }};
  if (auto err = in_ranges(links))
    return err;
  if (p.prefill_per_token_ns + p.prefill_per_key_ns + p.prefill_per_cached_token_ns <= 0)
    return field_error("fit.prefill_per_token_ns", "a fit whose prefill costs nothing per token");
  if (p.decode_per_sequence_ns + p.decode_per_context_token_ns <= 0)
    return field_error("fit.decode_per_sequence_ns", "a fit whose decode costs nothing per "
                                                     "sequence");
  return {};
}

caf::error validate_warmup(const modeled_profile& p) {
  const size_t n = p.warmup_idle_ms.size();
  if (n == 0 && p.prefill_warmup_ns.empty() && p.decode_warmup_ns.empty())
    return {};
  if (n > warmup_points_max)
    return field_error("warmup.idle_ms",
                       "at most " + std::to_string(warmup_points_max) + " points");
  if (p.prefill_warmup_ns.size() != n || p.decode_warmup_ns.size() != n)
    return field_error("warmup.idle_ms", "idle_ms, prefill_extra_ns and decode_extra_ns must "
                                         "have as many points each");
  if (p.shared_cores == 0)
    return field_error("warmup.idle_ms", "a warm-up needs machine.shared_cores (it is measured "
                                         "for an engine on the host's cores)");
  for (size_t i = 0; i < n; ++i) {
    if (auto err = in_range("warmup.idle_ms", p.warmup_idle_ms[i], 1e-3, 3.6e6))
      return err;
    if (i > 0 && p.warmup_idle_ms[i] <= p.warmup_idle_ms[i - 1])
      return field_error("warmup.idle_ms", "must increase point by point");
    if (auto err = in_range("warmup.prefill_extra_ns", p.prefill_warmup_ns[i], 0, 1e11))
      return err;
    if (auto err = in_range("warmup.decode_extra_ns", p.decode_warmup_ns[i], 0, 1e11))
      return err;
  }
  return {};
}

} // namespace

uint64_t warmup_extra_ns(std::span<const double> idle_ms, std::span<const double> extra_ns,
                         int64_t idle_ns) {
  assert(idle_ms.size() == extra_ns.size());
  if (idle_ms.empty() || idle_ns <= 0)
    return 0;
  const double idle = static_cast<double>(idle_ns) / 1e6;
  double x0 = 0;
  double y0 = 0;
  for (size_t i = 0; i < idle_ms.size(); ++i) {
    if (idle <= idle_ms[i])
      return to_ns((y0 + (extra_ns[i] - y0) * (idle - x0) / (idle_ms[i] - x0)) / 1e9);
    x0 = idle_ms[i];
    y0 = extra_ns[i];
  }
  return to_ns(y0 / 1e9);
}

namespace {

// The SSD is optional: all three fields 0, or bandwidths in range and a latency of at most 1 s.
caf::error validate_ssd(const modeled_profile& p) {
  if (p.ssd_read_bytes_per_s == 0 && p.ssd_write_bytes_per_s == 0 && p.ssd_latency_s == 0)
    return {};
  const std::array<field_range, 3> ssd = {{
      {"ssd_read_bytes_per_s", p.ssd_read_bytes_per_s, 1e6, 1e14},
      {"ssd_write_bytes_per_s", p.ssd_write_bytes_per_s, 1e6, 1e14},
      {"ssd_latency_s", p.ssd_latency_s, 0, 1},
  }};
  return in_ranges(ssd);
}

} // namespace

caf::error validate(const modeled_profile& p) {
  if (p.name.empty() || p.name.size() > 128)
    return field_error("name", "must be 1 to 128 characters");
  if (p.shared_cores > 1024)
    return field_error("shared_cores", "must be in [0, 1024]");
  const std::array<std::pair<const char*, uint64_t>, 7> shape = {{{"layers", p.layers},
                                                                  {"d_model", p.d_model},
                                                                  {"heads", p.heads},
                                                                  {"kv_heads", p.kv_heads},
                                                                  {"ffn", p.ffn},
                                                                  {"vocab", p.vocab},
                                                                  {"gpus", p.gpus}}};
  for (const auto& [field, value] : shape)
    if (value == 0)
      return field_error(field, "must be positive");
  if (auto err = validate_warmup(p))
    return err;
  if (auto err = validate_ssd(p))
    return err;
  if (p.fitted)
    return validate_fit(p);
  const std::array<field_range, 17> ranges = {{
      {"kv_element_bytes", double(p.kv_element_bytes), 1, 4},
      {"parameters", p.parameters, 1e3, 1e14},
      {"weight_element_bytes", p.weight_element_bytes, 0.125, 8},
      {"cost_a", p.cost_a, 0.01, 1e3},
      {"cost_b", p.cost_b, 0.01, 1e3},
      {"gpus", double(p.gpus), 1, 1024},
      {"gpu_flops_per_s", p.gpu_flops_per_s, 1e6, 1e18},
      {"gpu_hbm_bytes", p.gpu_hbm_bytes, 1e6, 1e14},
      {"gpu_hbm_bytes_per_s", p.gpu_hbm_bytes_per_s, 1e6, 1e15},
      {"h2d_bytes_per_s", p.h2d_bytes_per_s, 1e6, 1e14},
      {"nic_bytes_per_s", p.nic_bytes_per_s, 1e6, 1e14},
      {"nic_latency_s", p.nic_latency_s, 0, 1},
      {"prefill_mfu", p.prefill_mfu, 1e-6, 1},
      {"decode_mfu", p.decode_mfu, 1e-6, 1},
      {"hbm_efficiency", p.hbm_efficiency, 1e-6, 1},
      {"prefill_call_overhead_s", p.prefill_call_overhead_s, 0, 10},
      {"decode_step_overhead_s", p.decode_step_overhead_s, 0, 10},
  }};
  if (auto err = in_ranges(ranges))
    return err;
  if (p.kv_capacity_bytes() <= 0)
    return field_error("parameters", "the weights (" + std::to_string(p.weight_bytes()) +
                                         " bytes) do not fit in the instance's HBM");
  return {};
}

caf::error check_model(const modeled_profile& p, const model_config& model) {
  const std::array<std::tuple<const char*, uint64_t, uint64_t>, 7> fields = {{
      {"layers", p.layers, model.layers},
      {"d_model", p.d_model, model.d_model},
      {"heads", p.heads, model.heads},
      {"kv_heads", p.kv_heads, model.kv_heads},
      {"ffn", p.ffn, model.ffn},
      {"vocab", p.vocab, model.vocab},
      {"kv_element_bytes", p.kv_element_bytes, model.kv_element_bytes},
  }};
  for (const auto& [field, mine, theirs] : fields)
    if (mine != theirs)
      return make_error(errc::bad_config, std::string{"model."} + field + " (" +
                                              std::to_string(theirs) + ") differs from profile " +
                                              p.name + "'s " + std::to_string(mine));
  return {};
}

model_config model_of(const modeled_profile& p, uint32_t block_tokens,
                      uint32_t context_tokens_max) {
  model_config m;
  m.layers = p.layers;
  m.d_model = p.d_model;
  m.heads = p.heads;
  m.kv_heads = p.kv_heads;
  m.ffn = p.ffn;
  m.vocab = p.vocab;
  m.kv_element_bytes = p.kv_element_bytes;
  m.block_tokens = block_tokens;
  m.context_tokens_max = context_tokens_max;
  return m;
}

uint64_t modeled_prefill_ns(const modeled_profile& p, uint64_t cached_tokens, uint64_t tokens) {
  if (tokens == 0)
    return 0;
  if (p.fitted) {
    const double n = static_cast<double>(tokens);
    const double keys = n * static_cast<double>(cached_tokens) + n * (n + 1) / 2;
    return to_ns((p.prefill_base_ns + p.prefill_per_token_ns * n + p.prefill_per_key_ns * keys +
                  p.prefill_per_cached_token_ns * static_cast<double>(cached_tokens)) /
                 1e9);
  }
  const double d = p.d_model;
  const double before = static_cast<double>(cached_tokens);
  const double after = before + static_cast<double>(tokens);
  const double flops = p.layers * (p.cost_a * d * (after * after - before * before) +
                                   p.cost_b * static_cast<double>(tokens) * d * d);
  const double rate = p.gpus * p.gpu_flops_per_s * p.prefill_mfu;
  return to_ns(flops / rate + p.prefill_call_overhead_s);
}

uint64_t modeled_prefill_layers_ns(const modeled_profile& p, uint64_t cached_tokens,
                                   uint64_t tokens, uint32_t layers_run, bool first_range) {
  const uint64_t all = modeled_prefill_ns(p, cached_tokens, tokens);
  if (tokens == 0 || layers_run >= p.layers)
    return all;
  const uint64_t overhead =
      std::min(all, to_ns(p.fitted ? p.prefill_base_ns / 1e9 : p.prefill_call_overhead_s));
  const auto body = static_cast<unsigned __int128>(all - overhead) * layers_run / p.layers;
  return static_cast<uint64_t>(body) + (first_range ? overhead : 0);
}

uint64_t modeled_decode_ns(const modeled_profile& p, std::span<const uint32_t> context_tokens,
                           uint64_t kv_bytes_per_token) {
  double positions = 0;
  for (auto c : context_tokens)
    positions += static_cast<double>(c) + 1.0;
  return modeled_decode_ns(p, context_tokens.size(), positions, kv_bytes_per_token);
}

uint64_t modeled_decode_ns(const modeled_profile& p, uint64_t batch, double positions,
                           uint64_t kv_bytes_per_token) {
  if (batch == 0)
    return 0;
  const double b = static_cast<double>(batch);
  if (p.fitted)
    return to_ns((p.decode_base_ns + p.decode_per_sequence_ns * b +
                  p.decode_per_context_token_ns * positions) /
                 1e9);
  // Every weight once, every position's KV once; per sequence the layers' projections and its
  // attention over (c + 1) positions: sum of a d (2 c + 1) = a d (2 positions - batch).
  const double d = p.d_model;
  const double kv_bytes = positions * static_cast<double>(kv_bytes_per_token);
  const double flops = p.layers * (p.cost_a * d * (2.0 * positions - b) + b * p.cost_b * d * d);
  const double memory_s =
      (p.weight_bytes() + kv_bytes) / (p.gpus * p.gpu_hbm_bytes_per_s * p.hbm_efficiency);
  const double compute_s = flops / (p.gpus * p.gpu_flops_per_s * p.decode_mfu);
  return to_ns(memory_s + compute_s + p.decode_step_overhead_s);
}

} // namespace crescent::gpu
