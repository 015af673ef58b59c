// The inner loops of the reference engine. Every function computes each output element with a
// floating-point operation order that depends only on that element's inputs and the model
// shape, never on how many rows are processed together: that is what makes KV bytes and logits
// independent of chunking and batching. Loops run over contiguous memory so g++ vectorizes them
// across independent outputs (which does not change any single element's order).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace crescent::gpu::ref {

/// out[r][c] = sum over k = 0, 1, ... of x[r][k] * w[k][c], for rows r of x ([rows][in]),
/// w ([in][cols], row-major) and out ([rows][cols]).
void matmul(const float* x, size_t rows, size_t in, const float* w, size_t cols, float* out);

/// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for rows of `dim` floats.
void rms_norm(const float* x, size_t rows, size_t dim, const float* weight, float eps, float* out);

/// Rotates `heads` consecutive vectors of head_dim floats by the angles whose cos and sin are
/// given (head_dim / 2 each): dimension i pairs with i + head_dim / 2.
void rope(float* v, uint32_t heads, uint32_t head_dim, const float* cos, const float* sin);

/// x[i] *= s.
void scale(float* x, size_t n, float s);

/// x[i] += y[i].
void add(float* x, const float* y, size_t n);

/// out[i] = silu(gate[i]) * up[i].
void swiglu(const float* gate, const float* up, size_t n, float* out);

/// Index of the largest value; ties go to the lowest index.
uint32_t argmax(const float* x, size_t n);

/// Where K and V of a token live in a page: [layer][K|V][kv_head][token][head_dim] floats.
struct page_layout {
  uint32_t kv_heads = 0;
  uint32_t block_tokens = 0;
  uint32_t head_dim = 0;

  /// Float offset of the [block_tokens][head_dim] slab of (layer, K=0 | V=1, kv_head).
  size_t slab(uint32_t layer, uint32_t kind, uint32_t kv_head) const {
    return ((size_t{layer} * 2 + kind) * kv_heads + kv_head) * block_tokens * head_dim;
  }
};

/// Causal attention of a group of query vectors ("lanes") over the keys of one sequence, for
/// one layer and one K/V head. A lane is a (token, query head) pair; lanes must be added in
/// non-decreasing position order, so that the lanes that see key j are always a suffix.
///
/// A lane's score for key j is 0 + q[0] * k[0] + q[1] * k[1] + ... left to right, and its
/// softmax denominator and weighted sum of V add their terms over keys 0, 1, ..., position in
/// order. Large groups (a prefill chunk) are computed with loops over lanes innermost, small
/// ones (a decode step) lane by lane; both perform exactly these operations, so a token's
/// output never depends on the group it was computed in.
class attention {
 public:
  static constexpr uint32_t lanes_max = 64;
  /// Groups of fewer lanes than this that all sit at one position (a decode step) are computed
  /// lane by lane, vectorized over keys and head_dim instead of over lanes.
  static constexpr uint32_t few_lanes = 8;

  attention(const page_layout& layout, uint32_t context_tokens_max);

  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == lanes_max; }
  uint32_t last_position() const { return position_[count_ - 1]; }

  /// q: head_dim floats, already rotated and scaled by 1/sqrt(head_dim); out: head_dim floats
  /// that receive the attention output; position: the token's position (keys 0..position).
  void add_lane(const float* q, float* out, uint32_t position);

  /// Computes every lane added since the last run, reading keys from `pages`.
  void run(std::span<std::byte* const> pages, uint32_t layer, uint32_t kv_head);

 private:
  void transpose_queries();
  /// The K or V vector (per `slab`) of token j.
  const float* kv_vector(std::span<std::byte* const> pages, size_t slab, uint32_t j) const;
  void score_keys(std::span<std::byte* const> pages, size_t k_slab);
  void mix_values(std::span<std::byte* const> pages, size_t v_slab);
  void write_outputs();
  void run_lane(std::span<std::byte* const> pages, size_t k_slab, size_t v_slab, uint32_t l);

  page_layout layout_;
  uint32_t count_ = 0;
  std::array<const float*, lanes_max> q_{};
  std::array<float*, lanes_max> out_{};
  std::array<uint32_t, lanes_max> position_{};
  std::vector<float> qt_;     // [head_dim][lanes]: queries, lane-major for the inner loops
  std::vector<float> scores_; // [key][lanes] (lane by lane: [key]): scores, then numerators
  std::vector<float> top_;    // [lanes]: running max of the scores
  std::vector<float> total_;  // [lanes]: softmax denominators
  std::vector<float> acc_;    // [head_dim][lanes]: weighted sums of V
};

} // namespace crescent::gpu::ref
