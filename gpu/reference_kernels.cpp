#include "gpu/reference_kernels.hpp"

#include "gpu/reference_math.hpp"
#include "gpu/reference_simd.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace crescent::gpu::ref {

namespace {

// out[c] += a * w[c]: one step of a matmul row. __restrict lets g++ vectorize without
// run-time overlap checks.
CRESCENT_INLINE void axpy(float* __restrict out, float a, const float* __restrict w, size_t n) {
  for (size_t c = 0; c < n; ++c)
    out[c] += a * w[c];
}

constexpr size_t tile_rows = 4;
constexpr size_t tile_cols = 16;

// A tile_rows x tile_cols block of out, accumulated in registers over all k.
CRESCENT_INLINE void matmul_tile(const float* __restrict x, size_t in, const float* __restrict w,
                                 size_t cols, float* __restrict out) {
  float8 acc[tile_rows][2] = {};
  for (size_t k = 0; k < in; ++k) {
    float8 w0, w1;
    load8(w0, w + k * cols);
    load8(w1, w + k * cols + 8);
    for (size_t i = 0; i < tile_rows; ++i) {
      const float a = x[i * in + k];
      acc[i][0] += a * w0;
      acc[i][1] += a * w1;
    }
  }
  for (size_t i = 0; i < tile_rows; ++i)
    for (size_t h = 0; h < 2; ++h)
      store8(out + i * cols + 8 * h, acc[i][h]);
}

// Columns [first, cols) of one row, for what the tiles leave over.
CRESCENT_INLINE void matmul_rest(const float* x, size_t in, const float* w, size_t cols,
                                 size_t first, float* out) {
  std::fill(out + first, out + cols, 0.0f);
  for (size_t k = 0; k < in; ++k)
    axpy(out + first, x[k], w + k * cols + first, cols - first);
}

} // namespace

// Tiles and remainders compute each element the same way: 0, then + x[k] * w[k][c] for
// k = 0, 1, ... in order.
CRESCENT_VECTOR_CLONES void matmul(const float* x, size_t rows, size_t in, const float* w,
                                   size_t cols, float* out) {
  const size_t full_cols = cols - cols % tile_cols;
  size_t r = 0;
  for (; r + tile_rows <= rows; r += tile_rows) {
    for (size_t c = 0; c < full_cols; c += tile_cols)
      matmul_tile(x + r * in, in, w + c, cols, out + r * cols + c);
    for (size_t i = 0; i < tile_rows; ++i)
      matmul_rest(x + (r + i) * in, in, w, cols, full_cols, out + (r + i) * cols);
  }
  for (; r < rows; ++r)
    matmul_rest(x + r * in, in, w, cols, 0, out + r * cols);
}

void rms_norm(const float* x, size_t rows, size_t dim, const float* weight, float eps, float* out) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float inv = 1.0f / std::sqrt(sum_of_squares(xr, static_cast<uint32_t>(dim)) / dim + eps);
    for (size_t i = 0; i < dim; ++i)
      o[i] = xr[i] * inv * weight[i];
  }
}

void rope(float* v, uint32_t heads, uint32_t head_dim, const float* cos, const float* sin) {
  const uint32_t half = head_dim / 2;
  for (uint32_t h = 0; h < heads; ++h) {
    float* a = v + size_t{h} * head_dim;
    float* b = a + half;
    for (uint32_t i = 0; i < half; ++i) {
      const float x0 = a[i];
      const float x1 = b[i];
      a[i] = x0 * cos[i] - x1 * sin[i];
      b[i] = x1 * cos[i] + x0 * sin[i];
    }
  }
}

void scale(float* x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i)
    x[i] *= s;
}

void add(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    x[i] += y[i];
}

CRESCENT_VECTOR_CLONES void swiglu(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = gate[i] / (1.0f + exp_f(-gate[i])) * up[i];
}

uint32_t argmax(const float* x, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (x[i] > x[best])
      best = i;
  return static_cast<uint32_t>(best);
}

} // namespace crescent::gpu::ref
