// Memory and kernels of one device, as the device engine (device_engine.hpp) drives them: the
// CUDA implementation (cuda_ops.cpp, kernels in model_kernels.cu) and a host emulation
// (host_ops.cpp) that runs the same per-element functions (model_elements.cuh) in loops on the
// CPU, so that the engine's code and its kernels' arithmetic are tested on machines without a
// GPU.
//
// Pointers given to and returned by the kernels are device addresses (host addresses for the
// host emulation). Kernels are queued in call order and return nothing: the first failure of
// a launch or a copy shows in finish(), which waits for everything queued. Arguments are
// assumed checked by the engine (sequence_checks.hpp): these are programmer contracts.
#pragma once

#include "gpu/cuda/model_elements.cuh"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace crescent::gpu {

using device_rows = elements::rows;

class device_ops {
 public:
  virtual ~device_ops() = default;

  /// The device, in words ("NVIDIA H200 (cuda:0)", "host emulation").
  virtual std::string describe() const = 0;

  /// Device memory; errc::no_space when there is not enough.
  virtual caf::expected<void*> allocate(size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  /// Synchronous copies between host and device memory.
  virtual caf::error to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual caf::error to_host(void* dst, const void* src, size_t bytes) = 0;
  /// A synchronous copy within device memory (the baseline of page gathers and scatters).
  virtual caf::error on_device(void* dst, const void* src, size_t bytes) = 0;

  /// x[r] = table[rows.tokens[r]] (d floats each), for r < n.
  virtual void embed(const float* table, uint32_t d, const device_rows& rows, uint32_t n,
                     float* x) = 0;
  /// out[r] = x[r] * rms_inverse(x[r]) * weight, rows of dim floats.
  virtual void rms_norm(const float* x, uint32_t rows, uint32_t dim, const float* weight, float eps,
                        float* out) = 0;
  /// out[rows][cols] = x[rows][in] w[in][cols].
  virtual void matmul(const float* x, uint32_t rows, uint32_t in, const float* w, uint32_t cols,
                      float* out) = 0;
  /// x[i] += y[i].
  virtual void add(float* x, const float* y, size_t n) = 0;
  /// act[r][i] = swiglu(gu[r][i], gu[r][ffn + i]).
  virtual void swiglu(const float* gu, uint32_t rows, uint32_t ffn, float* act) = 0;
  /// For each row: rotates its queries and keys in qkv by its position's angles (cos, sin:
  /// [position][head_dim / 2]), scales the queries by q_scale, and writes its K and V into its
  /// page at s.layer.
  virtual void rope_store(float* qkv, const elements::attention_shape& s, const device_rows& rows,
                          uint32_t n, const float* cos, const float* sin, float q_scale) = 0;
  /// Causal attention of lanes [lane_first, lane_first + lane_count) (lane = row * heads + head)
  /// over their sequences' keys 0..position, writing mixed[row][head * head_dim + d].
  /// `scores` holds lane_count x scores_stride floats and `totals` lane_count floats of scratch;
  /// keys_max bounds every lane's key count (the largest position + 1) and scores_stride.
  virtual void attention(const float* qkv, const elements::attention_shape& s,
                         const device_rows& rows, uint32_t lane_first, uint32_t lane_count,
                         uint32_t keys_max, float* scores, size_t scores_stride, float* totals,
                         float* mixed) = 0;
  /// out[r] = the index of the first largest of logits[r][0..vocab).
  virtual void argmax(const float* logits, uint32_t rows, uint32_t vocab, uint32_t* out) = 0;

  /// Waits for everything queued; the first error since the last finish().
  virtual caf::error finish() = 0;
};

/// The host emulation: "device" memory is host memory, kernels are loops.
std::unique_ptr<device_ops> make_host_ops();

/// CUDA device `index` of this machine; errc::unavailable with the reason in a build without
/// CUDA, without a driver, or without that device.
caf::expected<std::unique_ptr<device_ops>> make_cuda_ops(int index);

} // namespace crescent::gpu
