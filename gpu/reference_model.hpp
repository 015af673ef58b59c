// The numerics of the reference engine: weights drawn from the seed, RoPE tables, and the
// forward pass of a group of token rows over paged KV. Arguments are assumed checked (see
// reference_engine.cpp); nothing here allocates after construction.
#pragma once

#include "gpu/model_config.hpp"
#include "gpu/reference_kernels.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace crescent::gpu::ref {

/// One token to compute: its id, its position in its sequence, and that sequence's pages.
struct token_row {
  std::span<std::byte* const> pages;
  uint32_t position = 0;
  uint32_t token = 0;
};

/// RoPE's cos and sin by position: [context_tokens_max][head_dim / 2] each.
struct rope_tables {
  std::vector<float> cos, sin;
};

/// The model's weights, drawn from cfg.seed: what the CPU model computes with and what a device
/// engine (gpu/cuda/device_engine.hpp) uploads. Matrices are row-major [in][out].
struct weights {
  struct layer {
    std::vector<float> attn_norm; // [d_model]
    std::vector<float> wqkv;      // [d_model][d_model + 2 * kv_dim]: Q | K | V
    std::vector<float> wo;        // [d_model][d_model]
    std::vector<float> ffn_norm;  // [d_model]
    std::vector<float> wgu;       // [d_model][2 * ffn]: gate | up
    std::vector<float> wdown;     // [ffn][d_model]
  };
  std::vector<float> embedding; // [vocab][d_model]
  std::vector<layer> layers;
  std::vector<float> final_norm; // [d_model]
  std::vector<float> lm_head;    // [d_model][vocab]
};

/// Draws every weight of cfg's model; may throw std::bad_alloc.
weights draw_weights(const model_config& cfg);

/// The RoPE tables of cfg (head_dim, context_tokens_max, rope_theta), computed once per process
/// for the first few shapes and shared; may throw std::bad_alloc.
std::shared_ptr<const rope_tables> rope_for(const model_config& cfg);

class model {
 public:
  /// Rows computed together by forward(); longer chunks are cut into groups of this size,
  /// which bounds scratch memory and changes no result.
  static constexpr size_t rows_max = 64;

  /// Draws the weights; may throw std::bad_alloc (the factory turns that into an error).
  explicit model(const model_config& cfg);

  /// Runs all layers for rows (at most rows_max), in order: writes each row's K and V into its
  /// pages and leaves the final residual stream of row r for greedy(r).
  void forward(std::span<const token_row> rows);

  /// forward() for layers [first, end) only. With first > 0 the rows' residual stream is read
  /// from `stream_in` (rows x d_model floats) instead of embedded; with `stream_out` it is
  /// written there after the last layer. greedy() is meaningful when end is the last layer.
  void forward_layers(std::span<const token_row> rows, uint32_t first, uint32_t end,
                      const float* stream_in, float* stream_out);

  /// The greedy next token after row r of the last forward().
  uint32_t greedy(size_t r);

  /// The logits (vocab floats) the last greedy() call took its argmax of: what a quality
  /// measure compares distributions by (crescent bench kv-codec).
  std::span<const float> logits() const { return logits_; }

  /// Row r's attention output (d_model floats, the heads' mixed values before Wo) in the last
  /// layer the last forward_layers() call computed: run one layer a call to see every layer's.
  std::span<const float> attention_output(size_t r) const {
    return {mixed_.data() + r * cfg_.d_model, cfg_.d_model};
  }

 private:
  using layer_weights = weights::layer;

  void self_attention(const layer_weights& w, uint32_t layer, std::span<const token_row> rows);
  void attend_rows(uint32_t layer, std::span<const token_row> rows);
  void feed_forward(const layer_weights& w, size_t n);
  void store_kv(const token_row& row, uint32_t layer, const float* k, const float* v) const;

  model_config cfg_;
  page_layout layout_;
  size_t qkv_cols_; // d_model + 2 * kv_dim
  weights w_;
  std::shared_ptr<const rope_tables> rope_; // shared by models with the same tables

  // Scratch, sized once for rows_max rows.
  std::vector<float> x_;      // residual stream [rows][d_model]
  std::vector<float> h_;      // normalized input of a sublayer [rows][d_model]
  std::vector<float> qkv_;    // [rows][qkv_cols_]
  std::vector<float> mixed_;  // attention output before Wo [rows][d_model]
  std::vector<float> proj_;   // sublayer output [rows][d_model]
  std::vector<float> gu_;     // [rows][2 * ffn]
  std::vector<float> act_;    // [rows][ffn]
  std::vector<float> logits_; // [vocab]
  attention attention_;
};

} // namespace crescent::gpu::ref
