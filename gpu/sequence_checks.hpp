// Checks every engine makes of its arguments before it writes anything, so that a failed call
// leaves pages untouched and the error says which sequence, token or page is wrong.
#pragma once

#include "gpu/engine.hpp"

#include <caf/error.hpp>

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

} // namespace crescent::gpu
