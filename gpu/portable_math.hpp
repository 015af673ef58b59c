// Float arithmetic that the CPU reference engine and the device engine's kernels compile from
// one source (g++ C++20 and nvcc C++17): the pieces whose every operation decides KV bytes, so
// that the two engines cannot drift apart (gpu/cuda/model_elements.cuh says why they must not).
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define CRESCENT_HD __host__ __device__
#else
// Forced inline on the host: the reference engine's loops that call these are also compiled for
// AVX2 (reference_simd.hpp), and a call would leave that copy.
#define CRESCENT_HD __attribute__((always_inline))
#endif

namespace crescent::gpu {

/// e^x in float, branch-free so that loops over it vectorize. Inputs are clamped to
/// [-87, 88]: results stay normal and finite (e^-87 stands in for 0 in softmax).
CRESCENT_HD inline float exp_f(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // Round x / ln 2 to the nearest integer by the 1.5 * 2^23 trick (exact for |t| < 2^22).
  const float t = x * 1.44269504f;
  const float k = (t + 12582912.0f) - 12582912.0f;
  const float r = (x - k * 0.693145751953125f) - k * 1.428606765330187e-06f; // ln 2 = hi + lo
  float p = 1.0f / 720.0f;
  p = 1.0f / 120.0f + p * r;
  p = 1.0f / 24.0f + p * r;
  p = 1.0f / 6.0f + p * r;
  p = 0.5f + p * r;
  p = 1.0f + p * r;
  p = 1.0f + p * r;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23;
  float scale = 0.0f;
  std::memcpy(&scale, &bits, sizeof scale); // std::bit_cast, which nvcc's C++17 lacks
  return p * scale;
}

/// x[0]^2 + ... + x[n-1]^2 as four interleaved partial sums combined as (s0 + s1) + (s2 + s3):
/// a fixed order (it depends only on n) that keeps four lanes busy instead of one serial chain.
/// For RMSNorm.
CRESCENT_HD inline float sum_of_squares(const float* x, uint32_t n) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  uint32_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += x[d] * x[d];
    s1 += x[d + 1] * x[d + 1];
    s2 += x[d + 2] * x[d + 2];
    s3 += x[d + 3] * x[d + 3];
  }
  for (; d < n; ++d)
    s0 += x[d] * x[d];
  return (s0 + s1) + (s2 + s3);
}

} // namespace crescent::gpu
