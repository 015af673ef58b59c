// Checks every engine makes of its arguments before it writes anything, so that a failed call
// leaves pages untouched and the error says which sequence, token or page is wrong.
#pragma once

#include "gpu/engine.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <chrono>

#include <cstddef>
#include <cstdint>
#include <span>

namespace crescent::gpu {

/// The place of a prefill among error sentences (decode batches give the sequence's index).
inline constexpr size_t prefill_call = SIZE_MAX;

/// Checks one sequence and the tokens to append to it (seq_index: its place in a decode batch,
/// or prefill_call): token ids below the vocabulary, the context limit, enough pages, and every
/// page that is read or written non-null and aligned to `page_alignment` bytes.
caf::error check_sequence(const model_config& cfg, const sequence_ref& seq,
                          std::span<const uint32_t> tokens, size_t seq_index,
                          size_t page_alignment);

/// Checks a decode batch's shape: at least one sequence, one token per sequence.
caf::error check_batch(std::span<const sequence_ref> seqs, std::span<const uint32_t> tokens);

/// Checks prefill_layers' own arguments: a non-empty range of the model's layers, and a stream
/// of at least `stream_bytes` bytes aligned to `alignment`.
caf::error check_layers(const model_config& cfg, layer_range r, std::span<const std::byte> stream,
                        size_t stream_bytes, size_t alignment);

/// check_batch, then check_sequence for each sequence of a decode batch; the batch's
/// model_flops when every check passes.
caf::expected<double> check_decode(const model_config& cfg, std::span<const sequence_ref> seqs,
                                   std::span<const uint32_t> tokens, size_t page_alignment);

/// An engine's timing options: modeled_flops_per_s finite and positive.
caf::error check_timing(const engine_options& options);

/// What a call costs under `options`: its wall time since `start` (measured), or `flops` at
/// the modeled rate.
uint64_t call_cost_ns(const engine_options& options, std::chrono::steady_clock::time_point start,
                      double flops);

} // namespace crescent::gpu
