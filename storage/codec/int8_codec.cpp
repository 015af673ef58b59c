// none and int8: the float32 rows as they are, and symmetric int8 per token and head.
//
// int8 payload, slab after slab in page order ([layer][K|V][kv_head]): float32 scale[tokens]
// (absmax / 127 of the token's head vector), then int8 code[tokens][head_dim]; an element
// decodes as code x scale. A float32 scale costs 4 bytes per head vector, 3% at 128 channels,
// and keeps the step exactly absmax / 127.
#include "storage/codec/codec_internal.hpp"

#include <array>
#include <vector>

namespace crescent::storage::codec::detail {

namespace {

size_t slab_count(const kv_shape& s) {
  return size_t{s.layers} * 2 * s.kv_heads;
}

CODEC_INLINE float row_absmax(const float* x, uint32_t n) {
  float8 top = {};
  for (uint32_t c = 0; c < n; c += 8)
    top = max8(top, abs8(load8(x + c)));
  return hmax8(top);
}

// Codes round(x / scale) with halves rounded up: v + 127.5 is positive, so the truncating
// conversion is a floor.
CODEC_CLONES void encode_rows(const float* x, uint32_t tokens, uint32_t n, float* scales,
                              int8_t* codes) {
  for (uint32_t t = 0; t < tokens; ++t, x += n, codes += n) {
    const float absmax = row_absmax(x, n);
    scales[t] = absmax / 127.0f;
    const float inv = absmax > 0.0f ? 127.0f / absmax : 0.0f;
    // A plain loop that g++ vectorizes with its narrowing packs (see codes_of_row).
    for (uint32_t c = 0; c < n; ++c) {
      float v = x[c] * inv + 127.5f;
      v = v < 0.0f ? 0.0f : v;
      v = v > 254.0f ? 254.0f : v;
      codes[c] = static_cast<int8_t>(static_cast<int32_t>(v) - 127);
    }
  }
}

CODEC_CLONES void decode_rows(const float* scales, const int8_t* codes, uint32_t tokens, uint32_t n,
                              float* x) {
  for (uint32_t t = 0; t < tokens; ++t, x += n, codes += n) {
    const float scale = scales[t];
    for (uint32_t c = 0; c < n; c += 8) {
      int32x8 q;
      for (int i = 0; i < 8; ++i)
        q[i] = codes[c + i];
      store8(x + c, __builtin_convertvector(q, float8) * scale);
    }
  }
}

} // namespace

size_t none_payload_bytes(const block_plan& plan) {
  return slab_count(plan.shape) * plan.tokens * plan.shape.head_dim * sizeof(float);
}

std::byte* none_encode_slab(const block_plan& plan, const float* slab, std::byte* out) {
  return put_rows(slab, plan.tokens, plan.shape.head_dim, out);
}

void none_decode(const block_plan& plan, const std::byte* in, float* page) {
  for (size_t slab = 0; slab < slab_count(plan.shape); ++slab)
    in = get_rows(in, plan.tokens, plan.shape.head_dim, page + slab * plan.shape.slab_floats());
}

size_t int8_payload_bytes(const block_plan& plan) {
  return slab_count(plan.shape) * plan.tokens * (sizeof(float) + plan.shape.head_dim);
}

// Scales go through an aligned scratch row so the loops may store them as floats; the payload
// itself is unaligned.
std::byte* int8_encode_slab(const block_plan& plan, const float* slab, std::byte* out) {
  const uint32_t n = plan.shape.head_dim;
  std::array<float, codec_block_tokens_max> scales;
  auto* codes = reinterpret_cast<int8_t*>(out + plan.tokens * sizeof(float));
  encode_rows(slab, plan.tokens, n, scales.data(), codes);
  std::memcpy(out, scales.data(), plan.tokens * sizeof(float));
  return out + plan.tokens * (sizeof(float) + n);
}

void int8_decode(const block_plan& plan, const std::byte* in, float* page) {
  const uint32_t n = plan.shape.head_dim;
  std::vector<float> scales(plan.tokens);
  for (size_t slab = 0; slab < slab_count(plan.shape); ++slab) {
    std::memcpy(scales.data(), in, plan.tokens * sizeof(float));
    const auto* codes = reinterpret_cast<const int8_t*>(in + plan.tokens * sizeof(float));
    decode_rows(scales.data(), codes, plan.tokens, n, page + slab * plan.shape.slab_floats());
    in += plan.tokens * (sizeof(float) + n);
  }
}

} // namespace crescent::storage::codec::detail
