// KIVI-style asymmetric 2- and 4-bit quantization (Liu et al., 2024: "KIVI: A Tuning-Free
// Asymmetric 2bit Quantization for KV Cache"). Keys have outlier channels, so they are quantized
// per channel over groups of tokens; values per token over groups of channels. An element
// decodes as zero + scale x code, zero and scale fp16 (zero at most the group's minimum, scale at
// least (max - zero) / (2^bits - 1), so that no element is clamped). The tokens after the last
// complete key group of a sequence's last block stay float32: KIVI keeps its most recent,
// ungrouped tokens at full precision until their group fills.
//
// Payload, slab after slab in page order, with nq = tokens - residual:
//   K slab: for each group of key_group tokens (the last may be shorter): fp16 zero[head_dim],
//           fp16 scale[head_dim], then each token's packed codes; then float32 residual rows.
//   V slab: for each of the nq tokens: (fp16 zero, fp16 scale) per group of value_group
//           channels, then its packed codes; then float32 residual rows.
#include "storage/codec/codec_internal.hpp"

#include <algorithm>
#include <array>

namespace crescent::storage::codec::detail {

namespace {

using row_floats = std::array<float, codec_head_dim_max>;
using row_codes = std::array<uint8_t, codec_head_dim_max>;

uint32_t ceil_div(uint32_t a, uint32_t b) {
  return (a + b - 1) / b;
}

float levels_of(const block_plan& plan) {
  return static_cast<float>((1u << plan.bits()) - 1);
}

// zero and step of one group from its min and max, rounded as the format stores them; `inv` is
// what the encoder multiplies by.
struct group_scale {
  uint16_t zero_h = 0, scale_h = 0;
  float zero = 0.0f, inv = 0.0f;
};

CODEC_INLINE group_scale scale_of(float lo, float hi, float levels) {
  group_scale g;
  g.zero_h = fp16_at_most(lo);
  g.zero = from_fp16(g.zero_h);
  g.scale_h = fp16_at_least((hi - g.zero) / levels);
  const float scale = from_fp16(g.scale_h);
  g.inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  return g;
}

CODEC_INLINE void quantize_row(const float* x, const float* zero, const float* inv, uint32_t n,
                               float levels, uint8_t* codes) {
  row_floats v;
  for (uint32_t c = 0; c < n; c += 8)
    store8(v.data() + c, (load8(x + c) - load8(zero + c)) * load8(inv + c));
  codes_of_row(v.data(), n, levels, codes);
}

// A plain loop: g++ widens the bytes with vector instructions (see codes_of_row).
CODEC_INLINE void dequantize_row(const uint8_t* codes, const float* zero, const float* scale,
                                 uint32_t n, float* x) {
  for (uint32_t c = 0; c < n; ++c)
    x[c] = zero[c] + scale[c] * static_cast<float>(codes[c]);
}

// One key group: per-channel min and max over its rows, the fp16 zero and scale of every
// channel, then the rows' codes.
CODEC_CLONES std::byte* encode_key_group(const block_plan& plan, const float* x, uint32_t rows,
                                         std::byte* out) {
  const uint32_t n = plan.shape.head_dim;
  const float levels = levels_of(plan);
  row_floats lo, hi, zero, inv;
  for (uint32_t c = 0; c < n; c += 8) {
    float8 l = load8(x + c), h = l;
    for (uint32_t t = 1; t < rows; ++t) {
      const float8 v = load8(x + size_t{t} * n + c);
      l = min8(l, v);
      h = max8(h, v);
    }
    store8(lo.data() + c, l);
    store8(hi.data() + c, h);
  }
  std::byte* scales = out + size_t{n} * sizeof(uint16_t);
  for (uint32_t c = 0; c < n; ++c) {
    const group_scale g = scale_of(lo[c], hi[c], levels);
    zero[c] = g.zero;
    inv[c] = g.inv;
    std::memcpy(out + size_t{c} * 2, &g.zero_h, 2);
    std::memcpy(scales + size_t{c} * 2, &g.scale_h, 2);
  }
  out += size_t{n} * 4;
  row_codes codes;
  for (uint32_t t = 0; t < rows; ++t, out += packed_bytes(n, plan.bits())) {
    quantize_row(x + size_t{t} * n, zero.data(), inv.data(), n, levels, codes.data());
    pack_codes(codes.data(), n, plan.bits(), out);
  }
  return out;
}

CODEC_CLONES const std::byte* decode_key_group(const block_plan& plan, const std::byte* in,
                                               uint32_t rows, float* x) {
  const uint32_t n = plan.shape.head_dim;
  row_floats zero, scale;
  for (uint32_t c = 0; c < n; ++c)
    zero[c] = from_fp16(get<uint16_t>(in));
  for (uint32_t c = 0; c < n; ++c)
    scale[c] = from_fp16(get<uint16_t>(in));
  row_codes codes;
  for (uint32_t t = 0; t < rows; ++t, in += packed_bytes(n, plan.bits())) {
    unpack_codes(in, n, plan.bits(), codes.data());
    dequantize_row(codes.data(), zero.data(), scale.data(), n, x + size_t{t} * n);
  }
  return in;
}

// One value row: min and max per channel group, then the row's codes. The groups' zeros and
// inverse steps are spread over the row's channels so that one loop quantizes the whole row.
CODEC_CLONES std::byte* encode_value_row(const block_plan& plan, const float* x, std::byte* out) {
  const uint32_t n = plan.shape.head_dim;
  const uint32_t gv = plan.value_group;
  const float levels = levels_of(plan);
  row_floats zero, inv;
  for (uint32_t first = 0; first < n; first += gv) {
    const uint32_t end = std::min(n, first + gv);
    float8 l = load8(x + first), h = l;
    for (uint32_t c = first + 8; c < end; c += 8) {
      l = min8(l, load8(x + c));
      h = max8(h, load8(x + c));
    }
    const group_scale g = scale_of(hmin8(l), hmax8(h), levels);
    put<uint16_t>(out, g.zero_h);
    put<uint16_t>(out, g.scale_h);
    std::fill(zero.data() + first, zero.data() + end, g.zero);
    std::fill(inv.data() + first, inv.data() + end, g.inv);
  }
  row_codes codes;
  quantize_row(x, zero.data(), inv.data(), n, levels, codes.data());
  pack_codes(codes.data(), n, plan.bits(), out);
  return out + packed_bytes(n, plan.bits());
}

CODEC_CLONES const std::byte* decode_value_row(const block_plan& plan, const std::byte* in,
                                               float* x) {
  const uint32_t n = plan.shape.head_dim;
  const uint32_t gv = plan.value_group;
  row_floats zero, scale;
  for (uint32_t first = 0; first < n; first += gv) {
    const uint32_t end = std::min(n, first + gv);
    std::fill(zero.data() + first, zero.data() + end, from_fp16(get<uint16_t>(in)));
    std::fill(scale.data() + first, scale.data() + end, from_fp16(get<uint16_t>(in)));
  }
  row_codes codes;
  unpack_codes(in, n, plan.bits(), codes.data());
  dequantize_row(codes.data(), zero.data(), scale.data(), n, x);
  return in + packed_bytes(n, plan.bits());
}

std::byte* encode_slab(const block_plan& plan, uint32_t kind, const float* x, std::byte* out) {
  const uint32_t n = plan.shape.head_dim;
  const uint32_t nq = plan.quantized_tokens();
  if (kind == 0)
    for (uint32_t first = 0; first < nq; first += plan.key_group)
      out =
          encode_key_group(plan, x + size_t{first} * n, std::min(plan.key_group, nq - first), out);
  else
    for (uint32_t t = 0; t < nq; ++t)
      out = encode_value_row(plan, x + size_t{t} * n, out);
  return put_rows(x + size_t{nq} * n, plan.full_last, n, out);
}

const std::byte* decode_slab(const block_plan& plan, uint32_t kind, const std::byte* in, float* x) {
  const uint32_t n = plan.shape.head_dim;
  const uint32_t nq = plan.quantized_tokens();
  if (kind == 0)
    for (uint32_t first = 0; first < nq; first += plan.key_group)
      in = decode_key_group(plan, in, std::min(plan.key_group, nq - first), x + size_t{first} * n);
  else
    for (uint32_t t = 0; t < nq; ++t)
      in = decode_value_row(plan, in, x + size_t{t} * n);
  return get_rows(in, plan.full_last, n, x + size_t{nq} * n);
}

} // namespace

size_t kivi_payload_bytes(const block_plan& plan) {
  const uint32_t n = plan.shape.head_dim;
  const uint32_t nq = plan.quantized_tokens();
  const size_t codes = size_t{nq} * packed_bytes(n, plan.bits());
  const size_t residual = size_t{plan.full_last} * n * sizeof(float);
  const size_t keys = size_t{ceil_div(nq, plan.key_group)} * n * 4 + codes + residual;
  const size_t values = size_t{nq} * ceil_div(n, plan.value_group) * 4 + codes + residual;
  return size_t{plan.shape.layers} * plan.shape.kv_heads * (keys + values);
}

std::byte* kivi_encode_slab(const block_plan& plan, slab_id id, const float* slab, std::byte* out) {
  return encode_slab(plan, id.kind, slab, out);
}

void kivi_decode(const block_plan& plan, const std::byte* in, float* page) {
  for (uint32_t l = 0; l < plan.shape.layers; ++l)
    for (uint32_t kind = 0; kind < 2; ++kind)
      for (uint32_t g = 0; g < plan.shape.kv_heads; ++g)
        in = decode_slab(plan, kind, in, page + plan.shape.slab_offset(l, kind, g));
}

} // namespace crescent::storage::codec::detail
