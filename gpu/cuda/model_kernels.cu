// The device engine's kernels. Each thread computes whole output elements with the functions
// of model_elements.cuh, so that every element is the reference engine's bit for bit (compiled
// with -fmad=false: gpu/CMakeLists.txt). Parallelism is only across independent elements;
// the one order-dependent reduction that crosses threads, a softmax denominator, is summed by
// one thread in key order. Speed is not the point of these kernels yet (issue 22: the device
// check measures them against the CPU reference).
#include "gpu/cuda/model_kernels.cuh"

namespace crescent::gpu::kernels {

namespace {

namespace el = elements;

constexpr unsigned block_threads = 128;
constexpr unsigned reduce_threads = 256;

unsigned blocks_for(size_t n, unsigned per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

cudaError_t launched() {
  return cudaGetLastError();
}

__global__ void embed_kernel(const float* table, uint32_t d, el::rows rows, float* x) {
  const uint32_t r = blockIdx.x;
  const float* src = table + size_t{rows.tokens[r]} * d;
  for (uint32_t i = threadIdx.x; i < d; i += blockDim.x)
    x[size_t{r} * d + i] = src[i];
}

__global__ void rms_norm_kernel(const float* x, uint32_t dim, const float* weight, float eps,
                                float* out) {
  __shared__ float inv;
  const float* xr = x + size_t{blockIdx.x} * dim;
  if (threadIdx.x == 0)
    inv = el::rms_inverse(xr, dim, eps);
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[size_t{blockIdx.x} * dim + i] = xr[i] * inv * weight[i];
}

__global__ void matmul_kernel(const float* x, uint32_t in, const float* w, uint32_t cols,
                              float* out) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t r = blockIdx.y;
  if (c < cols)
    out[size_t{r} * cols + c] = el::matmul_element(x, in, w, cols, r, c);
}

__global__ void add_kernel(float* x, const float* y, size_t n) {
  const size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] += y[i];
}

__global__ void swiglu_kernel(const float* gu, uint32_t ffn, float* act) {
  const uint32_t r = blockIdx.y;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < ffn)
    act[size_t{r} * ffn + i] =
        el::swiglu_element(gu[size_t{r} * 2 * ffn + i], gu[size_t{r} * 2 * ffn + ffn + i]);
}

// One block per row: query pairs (rotated, then scaled), key pairs (rotated, stored), values
// (stored). Each pair is one thread's, so no two threads touch one element.
__global__ void rope_store_kernel(float* qkv, el::attention_shape s, el::rows rows,
                                  const float* cos, const float* sin, float q_scale) {
  const uint32_t r = blockIdx.x;
  const uint32_t half = s.head_dim / 2;
  const uint32_t pos = rows.positions[r];
  float* q = qkv + size_t{r} * s.qkv_cols;
  float* k = q + s.d_model;
  const float* v = k + size_t{s.kv_heads} * s.head_dim;
  const float* c = cos + size_t{pos} * half;
  const float* sn = sin + size_t{pos} * half;
  auto* page = reinterpret_cast<float*>(rows.pages[rows.page_first[r] + pos / s.block_tokens]);
  const size_t slot = size_t{pos % s.block_tokens} * s.head_dim;
  const uint32_t q_pairs = s.heads * half;
  const uint32_t k_pairs = s.kv_heads * half;
  const uint32_t v_elems = s.kv_heads * s.head_dim;
  for (uint32_t t = threadIdx.x; t < q_pairs + k_pairs + v_elems; t += blockDim.x) {
    if (t < q_pairs) {
      const uint32_t h = t / half, i = t % half;
      float& a = q[size_t{h} * s.head_dim + i];
      float& b = q[size_t{h} * s.head_dim + half + i];
      el::rope_pair(a, b, c[i], sn[i]);
      a *= q_scale;
      b *= q_scale;
    } else if (t < q_pairs + k_pairs) {
      const uint32_t g = (t - q_pairs) / half, i = (t - q_pairs) % half;
      float& a = k[size_t{g} * s.head_dim + i];
      float& b = k[size_t{g} * s.head_dim + half + i];
      el::rope_pair(a, b, c[i], sn[i]);
      page[el::slab(s, 0, g) + slot + i] = a;
      page[el::slab(s, 0, g) + slot + half + i] = b;
    } else {
      const uint32_t e = t - q_pairs - k_pairs;
      const uint32_t g = e / s.head_dim, d = e % s.head_dim;
      page[el::slab(s, 1, g) + slot + d] = v[e];
    }
  }
}

struct lane_view {
  uint32_t row, head, kv_head, keys;
  std::byte* const* pages;
};

__device__ lane_view lane_of(const el::attention_shape& s, const el::rows& rows, uint32_t lane) {
  const uint32_t r = lane / s.heads;
  const uint32_t h = lane % s.heads;
  return {r, h, h / (s.heads / s.kv_heads), rows.positions[r] + 1, rows.pages + rows.page_first[r]};
}

// Grid (lanes, key blocks): one thread per (lane, key).
__global__ void score_kernel(const float* qkv, el::attention_shape s, el::rows rows,
                             uint32_t lane_first, float* scores, size_t stride) {
  const auto l = lane_of(s, rows, lane_first + blockIdx.x);
  const uint32_t j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= l.keys)
    return;
  const float* q = qkv + size_t{l.row} * s.qkv_cols + size_t{l.head} * s.head_dim;
  const float* k = el::kv_vector(l.pages, el::slab(s, 0, l.kv_head), s.block_tokens, s.head_dim, j);
  scores[blockIdx.x * stride + j] = el::score_element(q, k, s.head_dim);
}

// One block per lane: the largest score (a maximum does not depend on order), the numerators in
// place, and their sum by one thread in key order.
__global__ void softmax_kernel(el::attention_shape s, el::rows rows, uint32_t lane_first,
                               float* scores, size_t stride, float* totals) {
  __shared__ float tops[reduce_threads];
  const auto l = lane_of(s, rows, lane_first + blockIdx.x);
  float* p = scores + blockIdx.x * stride;
  float top = -INFINITY;
  for (uint32_t j = threadIdx.x; j < l.keys; j += blockDim.x)
    top = top < p[j] ? p[j] : top;
  tops[threadIdx.x] = top;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      tops[threadIdx.x] = tops[threadIdx.x] < tops[threadIdx.x + half] ? tops[threadIdx.x + half]
                                                                       : tops[threadIdx.x];
    __syncthreads();
  }
  top = tops[0];
  for (uint32_t j = threadIdx.x; j < l.keys; j += blockDim.x)
    p[j] = exp_f(p[j] - top);
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (uint32_t j = 0; j < l.keys; ++j)
      total += p[j];
    totals[blockIdx.x] = total;
  }
}

// One block per lane, one thread per output dimension.
__global__ void mix_kernel(el::attention_shape s, el::rows rows, uint32_t lane_first,
                           const float* scores, size_t stride, const float* totals, float* mixed) {
  const auto l = lane_of(s, rows, lane_first + blockIdx.x);
  const float* p = scores + blockIdx.x * stride;
  const size_t v_slab = el::slab(s, 1, l.kv_head);
  for (uint32_t d = threadIdx.x; d < s.head_dim; d += blockDim.x)
    mixed[size_t{l.row} * s.d_model + size_t{l.head} * s.head_dim + d] = el::mix_element(
        l.pages, v_slab, s.block_tokens, s.head_dim, l.keys, p, totals[blockIdx.x], d);
}

// One block per row: each thread the first best of its indices, then pairs by el::better.
__global__ void argmax_kernel(const float* logits, uint32_t vocab, uint32_t* out) {
  __shared__ float values[reduce_threads];
  __shared__ uint32_t indices[reduce_threads];
  const float* x = logits + size_t{blockIdx.x} * vocab;
  float best = -INFINITY;
  uint32_t at = UINT32_MAX;
  for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x)
    if (at == UINT32_MAX || el::better(x[i], i, best, at)) {
      best = x[i];
      at = i;
    }
  values[threadIdx.x] = best;
  indices[threadIdx.x] = at;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half && indices[threadIdx.x + half] != UINT32_MAX &&
        (indices[threadIdx.x] == UINT32_MAX ||
         el::better(values[threadIdx.x + half], indices[threadIdx.x + half], values[threadIdx.x],
                    indices[threadIdx.x]))) {
      values[threadIdx.x] = values[threadIdx.x + half];
      indices[threadIdx.x] = indices[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = indices[0];
}

} // namespace

cudaError_t embed(const float* table, uint32_t d, elements::rows rows, uint32_t n, float* x) {
  embed_kernel<<<n, block_threads>>>(table, d, rows, x);
  return launched();
}

cudaError_t rms_norm(const float* x, uint32_t rows, uint32_t dim, const float* weight, float eps,
                     float* out) {
  rms_norm_kernel<<<rows, block_threads>>>(x, dim, weight, eps, out);
  return launched();
}

cudaError_t matmul(const float* x, uint32_t rows, uint32_t in, const float* w, uint32_t cols,
                   float* out) {
  matmul_kernel<<<dim3(blocks_for(cols, block_threads), rows), block_threads>>>(x, in, w, cols,
                                                                                out);
  return launched();
}

cudaError_t add(float* x, const float* y, size_t n) {
  add_kernel<<<blocks_for(n, block_threads), block_threads>>>(x, y, n);
  return launched();
}

cudaError_t swiglu(const float* gu, uint32_t rows, uint32_t ffn, float* act) {
  swiglu_kernel<<<dim3(blocks_for(ffn, block_threads), rows), block_threads>>>(gu, ffn, act);
  return launched();
}

cudaError_t rope_store(float* qkv, elements::attention_shape s, elements::rows rows, uint32_t n,
                       const float* cos, const float* sin, float q_scale) {
  rope_store_kernel<<<n, block_threads>>>(qkv, s, rows, cos, sin, q_scale);
  return launched();
}

cudaError_t attention(const float* qkv, elements::attention_shape s, elements::rows rows,
                      uint32_t lane_first, uint32_t lane_count, uint32_t keys_max, float* scores,
                      size_t scores_stride, float* totals, float* mixed) {
  score_kernel<<<dim3(lane_count, blocks_for(keys_max, block_threads)), block_threads>>>(
      qkv, s, rows, lane_first, scores, scores_stride);
  if (auto rc = launched(); rc != cudaSuccess)
    return rc;
  softmax_kernel<<<lane_count, reduce_threads>>>(s, rows, lane_first, scores, scores_stride,
                                                 totals);
  if (auto rc = launched(); rc != cudaSuccess)
    return rc;
  mix_kernel<<<lane_count, block_threads>>>(s, rows, lane_first, scores, scores_stride, totals,
                                            mixed);
  return launched();
}

cudaError_t argmax(const float* logits, uint32_t rows, uint32_t vocab, uint32_t* out) {
  argmax_kernel<<<rows, reduce_threads>>>(logits, vocab, out);
  return launched();
}

} // namespace crescent::gpu::kernels
