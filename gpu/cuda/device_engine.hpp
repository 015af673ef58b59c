// The device engine: the reference model (same config, same seeded weights) computed by a
// device's kernels, with its KV pages in that device's memory (issue 22). Its kernels perform
// the reference engine's operations in the reference engine's order (model_elements.cuh), so
// its KV bytes and greedy tokens are the reference engine's, bit for bit: a page it writes is
// the page a CPU worker would have written.
//
// The contract is gpu::engine's (engine.hpp), with two differences a caller must know:
//  - the pages of every sequence_ref are device addresses on the engine's device (the host
//    emulation's are host addresses), 4-byte aligned, page_bytes() each;
//  - prefill_layers' stream is host memory, copied to and from the device around the call.
// Calls are synchronous: each returns once its kernels have finished, so a page is complete
// when the call returns.
//
// Built on every machine: make_device_engine with make_host_ops() (device_ops.hpp) runs the
// engine's code with its kernels emulated on the CPU, which is how it is tested without a GPU.
// make_cuda_engine returns errc::unavailable with the reason where there is no CUDA device.
#pragma once

#include "gpu/cuda/device_ops.hpp"
#include "gpu/engine.hpp"

#include <caf/expected.hpp>

#include <memory>

namespace crescent::gpu {

/// Device memory the engine holds besides the caller's pages, at most: the weights, the RoPE
/// tables, and the scratch of one group of rows. A model that needs more is refused.
inline constexpr uint64_t device_engine_memory_max = uint64_t{16} << 30;

/// Scratch for attention scores, at most; lanes are computed in passes that fit it.
inline constexpr uint64_t device_engine_scores_bytes_max = uint64_t{256} << 20;

/// The engine on `ops` (the host emulation, or a CUDA device from make_cuda_ops). Errors: the
/// reference engine's limits (check_reference_limits), limit_exceeded past
/// device_engine_memory_max, no_space when the device cannot hold the weights and scratch.
/// `scores_bytes_max` (at most device_engine_scores_bytes_max) sizes the attention scratch: a
/// test makes it small to compute a group's lanes in several passes.
caf::expected<std::unique_ptr<engine>>
make_device_engine(const model_config& cfg, engine_options options, std::unique_ptr<device_ops> ops,
                   uint64_t scores_bytes_max = device_engine_scores_bytes_max);

/// The engine on CUDA device `device`: errc::unavailable (with the reason) in a build without
/// CUDA or on a machine without that device.
caf::expected<std::unique_ptr<engine>> make_cuda_engine(const model_config& cfg,
                                                        engine_options options, int device = 0);

} // namespace crescent::gpu
