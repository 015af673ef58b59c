// The reference engine: argument checks, timing, and the engine interface around
// ref::model (reference_model.cpp), which holds the numerics.
#include "gpu/engine.hpp"

#include "gpu/reference_model.hpp"
#include "gpu/sequence_checks.hpp"
#include "messages/errors.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace crescent::gpu {

namespace {

using std::to_string;

class reference_engine final : public engine {
 public:
  reference_engine(const model_config& cfg, engine_options options)
      : cfg_(cfg), options_(options), model_(cfg) {}

  const model_config& config() const override { return cfg_; }

  caf::expected<prefill_result> prefill(const sequence_ref& seq,
                                        std::span<const uint32_t> tokens) override {
    return run_prefill(seq, tokens, {0, cfg_.layers}, {});
  }

  size_t stream_bytes(uint32_t tokens) const override {
    return size_t{tokens} * cfg_.d_model * sizeof(float);
  }

  caf::expected<prefill_result> prefill_layers(const sequence_ref& seq,
                                               std::span<const uint32_t> tokens, layer_range r,
                                               std::span<std::byte> stream) override {
    if (auto err = check_layers(cfg_, r, stream, stream_bytes(tokens.size()), alignof(float)))
      return err;
    return run_prefill(seq, tokens, r, stream);
  }

  caf::expected<decode_result> decode(std::span<const sequence_ref> seqs,
                                      std::span<const uint32_t> tokens) override {
    const auto start = std::chrono::steady_clock::now();
    auto flops = check_decode(cfg_, seqs, tokens, alignof(float));
    if (!flops)
      return flops.error();
    decode_result result;
    result.next_tokens.reserve(seqs.size());
    for (size_t first = 0; first < seqs.size(); first += ref::model::rows_max) {
      const size_t n = std::min(ref::model::rows_max, seqs.size() - first);
      for (size_t r = 0; r < n; ++r)
        rows_[r] = {seqs[first + r].pages, seqs[first + r].length_tokens, tokens[first + r]};
      model_.forward({rows_.data(), n});
      for (size_t r = 0; r < n; ++r)
        result.next_tokens.push_back(model_.greedy(r));
    }
    result.compute_ns = call_cost_ns(options_, start, *flops);
    return result;
  }

 private:
  // Layers r of a chunk, row group after row group (each group runs all of r before the next
  // starts, which the determinism contract allows); the stream in and out of `stream`, when r
  // is not the whole model.
  caf::expected<prefill_result> run_prefill(const sequence_ref& seq,
                                            std::span<const uint32_t> tokens, layer_range r,
                                            std::span<std::byte> stream) {
    const auto start = std::chrono::steady_clock::now();
    if (auto err = check_sequence(cfg_, seq, tokens, prefill_call, alignof(float)))
      return err;
    auto* floats = reinterpret_cast<float*>(stream.data());
    size_t n = 0;
    for (size_t first = 0; first < tokens.size(); first += n) {
      n = std::min(ref::model::rows_max, tokens.size() - first);
      for (size_t i = 0; i < n; ++i)
        rows_[i] = {seq.pages, static_cast<uint32_t>(seq.length_tokens + first + i),
                    tokens[first + i]};
      float* group = stream.empty() ? nullptr : floats + first * cfg_.d_model;
      model_.forward_layers({rows_.data(), n}, r.first, r.end, r.first == 0 ? nullptr : group,
                            r.end == cfg_.layers ? nullptr : group);
    }
    prefill_result result;
    if (r.end == cfg_.layers)
      result.next_token = model_.greedy(n - 1);
    result.compute_ns =
        call_cost_ns(options_, start, layer_flops(cfg_, seq.length_tokens, tokens.size(), r));
    return result;
  }

  model_config cfg_;
  engine_options options_;
  ref::model model_;
  std::array<ref::token_row, ref::model::rows_max> rows_{};
};

} // namespace

double model_flops(const model_config& cfg, uint64_t context_tokens, uint64_t tokens) {
  if (tokens == 0)
    return 0.0;
  const double d = cfg.d_model;
  const double kv = cfg.kv_dim();
  const double f = cfg.ffn;
  const double t = static_cast<double>(tokens);
  // Multiply-adds per token and layer: Q, K, V, output projection, gate, up and down.
  const double proj_macs = d * d + 2.0 * d * kv + d * d + 3.0 * d * f;
  // Keys attended by the i-th new token: context + i + 1; summed over i < tokens.
  const double keys = t * static_cast<double>(context_tokens) + t * (t + 1.0) / 2.0;
  const double attn_flops = 2.0 * 2.0 * cfg.head_dim() * cfg.heads * keys;
  return cfg.layers * (2.0 * proj_macs * t + attn_flops) + 2.0 * d * cfg.vocab;
}

double layer_flops(const model_config& cfg, uint64_t context_tokens, uint64_t tokens,
                   layer_range r) {
  if (tokens == 0)
    return 0.0;
  const double head = 2.0 * cfg.d_model * cfg.vocab;
  const double per_layer = (model_flops(cfg, context_tokens, tokens) - head) / cfg.layers;
  return per_layer * r.count() + (r.end == cfg.layers ? head : 0.0);
}

caf::expected<std::unique_ptr<engine>> make_reference_engine(const model_config& cfg,
                                                             engine_options options) {
  if (auto err = validate(cfg))
    return err;
  if (auto err = check_reference_limits(cfg))
    return err;
  if (auto err = check_timing(options))
    return err;
  try {
    return std::unique_ptr<engine>{std::make_unique<reference_engine>(cfg, options)};
  } catch (const std::bad_alloc&) {
    return make_error(errc::no_space, "reference engine: not enough memory for the weights of "
                                      "this model config");
  }
}

} // namespace crescent::gpu
