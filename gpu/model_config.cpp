#include "gpu/model_config.hpp"

#include "messages/errors.hpp"

#include <xxhash.h>

#include <array>
#include <bit>
#include <cmath>
#include <span>
#include <string>

namespace crescent::gpu {

namespace {

/// Bumped whenever the reference engine's arithmetic changes, so that KV computed by an older
/// build never matches a block key of a newer one.
constexpr uint64_t kv_format_version = 1;

caf::error field_error(std::string text) {
  return make_error(errc::bad_config, std::move(text));
}

caf::error check_range(const char* field, uint64_t value, uint64_t lo, uint64_t hi) {
  if (value >= lo && value <= hi)
    return {};
  return field_error(std::string{field} + " (" + std::to_string(value) + ") must be in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

std::string num(uint64_t value) {
  return std::to_string(value);
}

caf::error check_shape(const model_config& cfg) {
  if (cfg.d_model % cfg.heads != 0)
    return field_error("model.heads (" + num(cfg.heads) + ") must divide model.d_model (" +
                       num(cfg.d_model) + ")");
  if (cfg.heads % cfg.kv_heads != 0)
    return field_error("model.kv_heads (" + num(cfg.kv_heads) + ") must divide model.heads (" +
                       num(cfg.heads) + ")");
  // RoPE rotates pairs of dimensions.
  if (cfg.head_dim() % 2 != 0)
    return field_error("model.d_model / model.heads (head dim " + num(cfg.head_dim()) +
                       ") must be even for RoPE");
  if (cfg.context_tokens_max < cfg.block_tokens)
    return field_error("model.context_tokens_max (" + num(cfg.context_tokens_max) +
                       ") must be at least model.block_tokens (" + num(cfg.block_tokens) + ")");
  if (cfg.kv_element_bytes == 3)
    return field_error("model.kv_element_bytes (3) must be 1, 2 or 4");
  if (cfg.page_bytes() > model_page_bytes_max)
    return field_error("model page bytes (" + num(cfg.page_bytes()) + ", from model.layers, " +
                       "model.kv_heads, model.block_tokens and head dim) must be at most " +
                       num(model_page_bytes_max));
  return {};
}

caf::error check_floats(const model_config& cfg) {
  if (!std::isfinite(cfg.rope_theta) || cfg.rope_theta <= 1.0f)
    return field_error("model.rope_theta (" + std::to_string(cfg.rope_theta) +
                       ") must be finite and greater than 1");
  if (!std::isfinite(cfg.norm_eps) || cfg.norm_eps <= 0.0f || cfg.norm_eps > 1.0f)
    return field_error("model.norm_eps (" + std::to_string(cfg.norm_eps) +
                       ") must be finite and in (0, 1]");
  return {};
}

} // namespace

caf::error validate(const model_config& cfg) {
  // Ranges first, so that the shape checks below never divide by zero.
  const std::array<caf::error, 9> ranges = {
      check_range("model.layers", cfg.layers, 1, model_layers_max),
      check_range("model.d_model", cfg.d_model, 1, model_d_model_max),
      check_range("model.heads", cfg.heads, 1, cfg.d_model == 0 ? 1 : cfg.d_model),
      check_range("model.kv_heads", cfg.kv_heads, 1, cfg.heads == 0 ? 1 : cfg.heads),
      check_range("model.ffn", cfg.ffn, 1, model_ffn_max),
      check_range("model.vocab", cfg.vocab, 1, model_vocab_max),
      check_range("model.block_tokens", cfg.block_tokens, 1, model_block_tokens_max),
      check_range("model.context_tokens_max", cfg.context_tokens_max, 1, model_context_tokens_max),
      check_range("model.kv_element_bytes", cfg.kv_element_bytes, 1, 4),
  };
  for (const auto& err : ranges)
    if (err)
      return err;
  if (auto err = check_shape(cfg))
    return err;
  return check_floats(cfg);
}

caf::error check_reference_limits(const model_config& cfg) {
  if (auto err = check_range("model.layers", cfg.layers, 1, reference_layers_max))
    return field_error(describe(err) + " for the reference engine");
  if (auto err = check_range("model.d_model", cfg.d_model, 1, reference_d_model_max))
    return field_error(describe(err) + " for the reference engine");
  if (auto err = check_range("model.context_tokens_max", cfg.context_tokens_max, 1,
                             reference_context_tokens_max))
    return field_error(describe(err) + " for the reference engine");
  if (cfg.kv_element_bytes != 4)
    return field_error("model.kv_element_bytes (" + std::to_string(cfg.kv_element_bytes) +
                       ") must be 4: the reference engine computes float32 KV");
  return {};
}

// A fixed little-endian record of every field that changes the bytes of a KV page, the KV
// layout's version first; context_tokens_max is left out because it only bounds how far a
// sequence may grow.
std::array<std::byte, 96> model_config::kv_record() const {
  const std::array<uint64_t, 12> fields = {
      kv_format_version,
      layers,
      d_model,
      heads,
      kv_heads,
      ffn,
      vocab,
      block_tokens,
      seed,
      std::bit_cast<uint32_t>(rope_theta),
      std::bit_cast<uint32_t>(norm_eps),
      kv_element_bytes,
  };
  std::array<std::byte, fields.size() * 8> bytes{};
  for (size_t i = 0; i < fields.size(); ++i)
    for (size_t b = 0; b < 8; ++b)
      bytes[i * 8 + b] = static_cast<std::byte>(fields[i] >> (8 * b));
  return bytes;
}

uint64_t model_config::fingerprint() const {
  const auto record = kv_record();
  return XXH3_64bits(record.data(), record.size());
}

block_key model_config::key_root() const {
  // 0x00 and a name set the root apart from every chain step (0x01, storage/block_key.hpp).
  static constexpr char tag[] = "\0crescent block key root v1";
  const auto record = kv_record();
  return sha256_key({std::as_bytes(std::span{tag, sizeof(tag) - 1}), record});
}

} // namespace crescent::gpu
