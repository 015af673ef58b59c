// The launchers of the device engine's kernels (model_kernels.cu), in a header free of CAF so
// that nvcc (C++17) never compiles CAF's headers. Each queues its kernels on the legacy default
// stream of the current device and returns the launch's cudaError_t; device_ops.hpp says what
// each computes.
#pragma once

#include "gpu/cuda/model_elements.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace crescent::gpu::kernels {

cudaError_t embed(const float* table, uint32_t d, elements::rows rows, uint32_t n, float* x);
cudaError_t rms_norm(const float* x, uint32_t rows, uint32_t dim, const float* weight, float eps,
                     float* out);
cudaError_t matmul(const float* x, uint32_t rows, uint32_t in, const float* w, uint32_t cols,
                   float* out);
cudaError_t add(float* x, const float* y, size_t n);
cudaError_t swiglu(const float* gu, uint32_t rows, uint32_t ffn, float* act);
cudaError_t rope_store(float* qkv, elements::attention_shape s, elements::rows rows, uint32_t n,
                       const float* cos, const float* sin, float q_scale);
cudaError_t attention(const float* qkv, elements::attention_shape s, elements::rows rows,
                      uint32_t lane_first, uint32_t lane_count, uint32_t keys_max, float* scores,
                      size_t scores_stride, float* totals, float* mixed);
cudaError_t argmax(const float* logits, uint32_t rows, uint32_t vocab, uint32_t* out);

} // namespace crescent::gpu::kernels
