// Shape of a Llama-style model and of its paged KV cache.
#pragma once

#include "messages/block_key.hpp"

#include <caf/expected.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace crescent::gpu {

struct model_config {
  uint32_t layers = 2;
  uint32_t d_model = 64;
  uint32_t heads = 4;    // query heads
  uint32_t kv_heads = 2; // key/value heads (grouped-query attention: heads % kv_heads == 0)
  uint32_t ffn = 176;    // SwiGLU hidden width
  uint32_t vocab = 256;
  uint32_t block_tokens = 16; // tokens per KV page, which is also one pool block
  // Bytes of one K or V element in a page: 4 (float32, the only width the reference engine
  // computes) or 2 (bf16, as LLaMA3-70B's KV in the paper; the modeled engine).
  uint32_t kv_element_bytes = 4;
  uint32_t context_tokens_max = 8192;
  uint64_t seed = 1; // weights are drawn from it: same seed, same model, bit for bit
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  uint32_t head_dim() const { return d_model / heads; }
  uint32_t kv_dim() const { return kv_heads * head_dim(); }
  /// Bytes of one KV page: [layer][K|V][kv_head][token][head_dim] elements of
  /// kv_element_bytes.
  size_t page_bytes() const {
    return size_t{layers} * 2 * kv_heads * block_tokens * head_dim() * kv_element_bytes;
  }
  /// Bytes of KV one token holds (all layers, K and V).
  size_t kv_bytes_per_token() const { return page_bytes() / block_tokens; }
  /// Every field that changes KV bytes, the layout's version (kv_format_version) first, as a
  /// fixed little-endian record: what fingerprint() and key_root() are taken over.
  std::array<std::byte, 96> kv_record() const;
  /// A stable 64-bit fingerprint of kv_record(): nodes and stored pages compare it to tell that
  /// they were made by the same model.
  uint64_t fingerprint() const;
  /// The root of the block-key chain (storage/block_key.hpp): the first 128 bits of SHA-256
  /// over a tag and kv_record(), so two models or KV layouts never share cache entries.
  block_key key_root() const;
};

/// Limits on every field, so that a config cannot ask for absurd memory. They admit the largest
/// models the modeled engine describes (LLaMA3-70B: 80 layers; 405B: 126 layers, d_model
/// 16384) and the longest prompts of the public Mooncake traces (191,378 tokens).
inline constexpr uint32_t model_layers_max = 128;
inline constexpr uint32_t model_d_model_max = 16384;
inline constexpr uint32_t model_vocab_max = 1u << 18;
inline constexpr uint32_t model_context_tokens_max = 1u << 20;
inline constexpr uint32_t model_ffn_max = 4 * model_d_model_max;
inline constexpr uint32_t model_block_tokens_max = 4096;
inline constexpr uint64_t model_page_bytes_max = uint64_t{1} << 30; // one KV page

/// Checks shape constraints; the error names the offending field.
caf::error validate(const model_config& cfg);

/// Tighter limits for the reference engine, which holds float32 weights and computes every
/// token on the CPU: at most 64 layers, d_model 8192 and contexts of 131,072 tokens (the
/// limits above admit the modeled engine's paper-sized models, which hold no weights).
inline constexpr uint32_t reference_layers_max = 64;
inline constexpr uint32_t reference_d_model_max = 8192;
inline constexpr uint32_t reference_context_tokens_max = 1u << 17;
caf::error check_reference_limits(const model_config& cfg);

} // namespace crescent::gpu
