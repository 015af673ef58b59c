// The reference model's arithmetic one output element at a time, for the device engine
// (device_engine.hpp): each function below is what one GPU thread computes, and the host
// emulation (host_ops.cpp) calls the same functions in loops. Each performs exactly the
// operations, in exactly the order, that the CPU reference engine performs for that element
// (gpu/reference_kernels.hpp, reference_attention.cpp), so with IEEE single precision and no
// fused multiply-adds (nvcc -fmad=false; g++ -ffp-contract=off) its KV bytes and logits are the
// reference engine's, bit for bit. The host emulation's tests check that on this machine.
//
// Plain C++17 without CAF: nvcc compiles it.
#pragma once

#include "gpu/portable_math.hpp" // CRESCENT_HD, exp_f, sum_of_squares

#include <cstddef>
#include <cstdint>
#include <math.h> // sqrtf, INFINITY: the same names in host and device code

namespace crescent::gpu::elements {

/// The rows of one call in device memory: row r is token tokens[r] at position positions[r] of
/// the sequence whose pages are pages[page_first[r]], pages[page_first[r] + 1], ...
struct rows {
  const uint32_t* tokens = nullptr;
  const uint32_t* positions = nullptr;
  const uint32_t* page_first = nullptr;
  std::byte* const* pages = nullptr;
};

/// The shape of one attention call, as every thread of it sees it.
struct attention_shape {
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t block_tokens = 0;
  uint32_t qkv_cols = 0; // floats of a row of qkv: d_model + 2 * kv_dim
  uint32_t d_model = 0;
  uint32_t layer = 0;
};

/// Float offset of the [block_tokens][head_dim] slab of (layer, K=0 | V=1, kv_head) in a page
/// (ref::page_layout::slab).
CRESCENT_HD inline size_t slab(const attention_shape& s, uint32_t kind, uint32_t kv_head) {
  return ((size_t{s.layer} * 2 + kind) * s.kv_heads + kv_head) * s.block_tokens * s.head_dim;
}

/// out[r][c] of ref::matmul: 0, then + x[r][k] * w[k][c] for k = 0, 1, ... in order.
CRESCENT_HD inline float matmul_element(const float* x, uint32_t in, const float* w, uint32_t cols,
                                        uint32_t r, uint32_t c) {
  const float* xr = x + size_t{r} * in;
  float acc = 0.0f;
  for (uint32_t k = 0; k < in; ++k)
    acc += xr[k] * w[size_t{k} * cols + c];
  return acc;
}

/// 1 / sqrt(mean(x^2) + eps) of one row, as ref::rms_norm.
CRESCENT_HD inline float rms_inverse(const float* x, uint32_t dim, float eps) {
  return 1.0f / sqrtf(sum_of_squares(x, dim) / static_cast<float>(dim) + eps);
}

/// ref::swiglu of one element.
CRESCENT_HD inline float swiglu_element(float gate, float up) {
  return gate / (1.0f + exp_f(-gate)) * up;
}

/// ref::rope of one pair (i, i + head_dim / 2): a and b in place.
CRESCENT_HD inline void rope_pair(float& a, float& b, float cos, float sin) {
  const float x0 = a;
  const float x1 = b;
  a = x0 * cos - x1 * sin;
  b = x1 * cos + x0 * sin;
}

/// The score of one key for one query: 0 + q[0] * k[0] + q[1] * k[1] + ... (the query already
/// rotated and scaled).
CRESCENT_HD inline float score_element(const float* q, const float* k, uint32_t head_dim) {
  float acc = 0.0f;
  for (uint32_t d = 0; d < head_dim; ++d)
    acc += q[d] * k[d];
  return acc;
}

/// The key or value vector of token j of a sequence whose pages are `pages`, at slab offset
/// `slab_floats`.
CRESCENT_HD inline const float* kv_vector(std::byte* const* pages, size_t slab_floats,
                                          uint32_t block_tokens, uint32_t head_dim, uint32_t j) {
  return reinterpret_cast<const float*>(pages[j / block_tokens]) + slab_floats +
         size_t{j % block_tokens} * head_dim;
}

/// One dimension of one lane's attention output: 0 + p[0] * v_0[d] + p[1] * v_1[d] + ... over
/// keys 0..n-1 in order, over the softmax denominator.
CRESCENT_HD inline float mix_element(std::byte* const* pages, size_t v_slab, uint32_t block_tokens,
                                     uint32_t head_dim, uint32_t n, const float* p, float total,
                                     uint32_t d) {
  float acc = 0.0f;
  for (uint32_t j = 0; j < n; ++j)
    acc += p[j] * kv_vector(pages, v_slab, block_tokens, head_dim, j)[d];
  return acc / total;
}

/// Whether (value b, index ib) beats (value a, index ia) in a greedy choice: larger, or as large
/// and earlier (ref::argmax keeps the first of equal maxima).
CRESCENT_HD inline bool better(float b, uint32_t ib, float a, uint32_t ia) {
  return b > a || (b == a && ib < ia);
}

} // namespace crescent::gpu::elements
