// KVQuant-style 3- and 4-bit quantization (Hooper et al., 2024: "KVQuant: Towards 10 Million
// Context Length LLM Inference with KV Cache Quantization"): per-channel keys before RoPE,
// per-token values, non-uniform datatypes calibrated per layer, per-vector dense-and-sparse
// outliers, attention sinks at full precision.
//
// The engine's pages hold keys after RoPE; this codec un-rotates each key at its position before
// quantizing and rotates it back after decoding (the block's first position says where), so the
// engine is unchanged and keys are still quantized pre-RoPE, where their channels keep stable
// ranges that an offline calibration can fix.
//
// Payload, slab after slab in page order: the block's sink tokens as float32 rows (keys as
// stored, after RoPE), then one record per other token:
//   K: u8 outlier channel[k], float32 outlier value[k] (pre-RoPE, exact), packed codes;
//      an element decodes as centre[c] + half_range[c] x key_level[code] (calibrated).
//   V: fp16 centre, fp16 half-range, u8 outlier channel[k], float32 outlier value[k], packed
//      codes; an element decodes as centre + half_range x value_level[code].
// k = kvquant_outliers_per_vector(head_dim): the largest |normalized| elements of the vector.
#include "storage/codec/kvquant_rows.hpp"

namespace crescent::storage::codec::detail {

namespace {

using row_floats = std::array<float, codec_head_dim_max>;
using row_codes = std::array<uint8_t, codec_head_dim_max>;

size_t record_bytes(const block_plan& plan, uint32_t kind) {
  const size_t meta = kind == 1 ? 2 * sizeof(uint16_t) : 0;
  return meta + plan.outliers * (1 + sizeof(float)) +
         packed_bytes(plan.shape.head_dim, plan.bits());
}

// base[c] + range[c] x levels[codes[c]] for a row (base and range per channel or, with
// stride 0, one for the row); a plain loop so that g++ picks its own gather.
CODEC_INLINE void dequantize_nuq(const uint8_t* codes, const float* levels, const float* base,
                                 const float* range, uint32_t stride, uint32_t n, float* x) {
  for (uint32_t c = 0; c < n; ++c)
    x[c] = base[c * stride] + range[c * stride] * levels[codes[c]];
}

CODEC_INLINE std::byte* put_outliers(const uint8_t* index, const float* x, uint32_t k,
                                     std::byte* out) {
  std::memcpy(out, index, k);
  out += k;
  for (uint32_t r = 0; r < k; ++r)
    put<float>(out, x[index[r]]);
  return out;
}

// False for a channel index past the row: only a block forged with a matching checksum gets
// here, and it must not write outside the row.
CODEC_INLINE bool patch_outliers(const std::byte* in, uint32_t k, uint32_t n, float* x) {
  const std::byte* values = in + k;
  for (uint32_t r = 0; r < k; ++r) {
    const auto c = static_cast<uint8_t>(in[r]);
    const auto value = get<float>(values);
    if (c >= n)
      return false;
    x[c] = value;
  }
  return true;
}

struct slab_ref {
  uint32_t layer = 0, kv_head = 0;
  const float* next = nullptr; // the next slab, fetched into cache a row per row encoded
};

// Row t of the next slab into cache while this row is encoded, so that the next slab's check
// (kv_codec.cpp) reads it from cache instead of waiting on memory.
CODEC_INLINE void fetch_row(const float* next, uint32_t t, uint32_t n) {
  if (next == nullptr)
    return;
  const char* row = reinterpret_cast<const char*>(next + size_t{t} * n);
  for (size_t b = 0; b < n * sizeof(float); b += 64)
    __builtin_prefetch(row + b);
}

CODEC_CLONES std::byte* encode_keys(const block_plan& plan, const kvquant_calibration& cal,
                                    slab_ref s, const float* x, std::byte* out) {
  const uint32_t n = plan.shape.head_dim, half = n / 2;
  const float* centre = cal.key_centre.data() + cal.channel_offset(s.layer, s.kv_head);
  const float* inv_half = cal.key_inv_half_range.data() + cal.channel_offset(s.layer, s.kv_head);
  const float* thresholds = cal.key_thresholds.data() + size_t{s.layer} * (cal.levels() - 1);
  row_floats pre, u, scratch;
  row_codes codes;
  std::array<uint8_t, kvquant_outliers_max> index{};
  for (uint32_t t = plan.full_first; t < plan.tokens; ++t) {
    fetch_row(s.next, t, n);
    const size_t p = size_t{plan.first_position} + t;
    unrotate(x + size_t{t} * n, cal.rope_cos.data() + p * half, cal.rope_sin.data() + p * half, n,
             pre.data());
    for (uint32_t c = 0; c < n; c += 8)
      store8(u.data() + c, (load8(pre.data() + c) - load8(centre + c)) * load8(inv_half + c));
    top_magnitudes(u.data(), n, plan.outliers, scratch.data(), index.data());
    out = put_outliers(index.data(), pre.data(), plan.outliers, out);
    quantize_nuq(u.data(), n, thresholds, cal.levels() - 1, codes.data());
    pack_codes(codes.data(), n, plan.bits(), out);
    out += packed_bytes(n, plan.bits());
  }
  return out;
}

CODEC_CLONES const std::byte* decode_keys(const block_plan& plan, const kvquant_calibration& cal,
                                          slab_ref s, const std::byte* in, float* x) {
  const uint32_t n = plan.shape.head_dim, half = n / 2;
  const float* centre = cal.key_centre.data() + cal.channel_offset(s.layer, s.kv_head);
  const float* half_range = cal.key_half_range.data() + cal.channel_offset(s.layer, s.kv_head);
  const float* levels = cal.key_levels.data() + size_t{s.layer} * cal.levels();
  row_floats pre;
  row_codes codes;
  for (uint32_t t = plan.full_first; t < plan.tokens; ++t) {
    const std::byte* outliers = in;
    in += plan.outliers * (1 + sizeof(float));
    unpack_codes(in, n, plan.bits(), codes.data());
    in += packed_bytes(n, plan.bits());
    dequantize_nuq(codes.data(), levels, centre, half_range, 1, n, pre.data());
    if (!patch_outliers(outliers, plan.outliers, n, pre.data()))
      return nullptr;
    const size_t p = size_t{plan.first_position} + t;
    rotate(pre.data(), cal.rope_cos.data() + p * half, cal.rope_sin.data() + p * half, n,
           x + size_t{t} * n);
  }
  return in;
}

CODEC_CLONES std::byte* encode_values(const block_plan& plan, const kvquant_calibration& cal,
                                      slab_ref s, const float* x, std::byte* out) {
  const uint32_t n = plan.shape.head_dim;
  const float* thresholds = cal.value_thresholds.data() + size_t{s.layer} * (cal.levels() - 1);
  row_floats u, scratch;
  row_codes codes;
  std::array<uint8_t, kvquant_outliers_max> index{};
  for (uint32_t t = plan.full_first; t < plan.tokens; ++t) {
    fetch_row(s.next, t, n);
    const float* row = x + size_t{t} * n;
    top_magnitudes(row, n, plan.outliers, scratch.data(), index.data());
    const value_norm norm = normalize_value(row, n, index.data(), plan.outliers);
    put<uint16_t>(out, norm.centre_h);
    put<uint16_t>(out, norm.half_h);
    out = put_outliers(index.data(), row, plan.outliers, out);
    for (uint32_t c = 0; c < n; c += 8)
      store8(u.data() + c, (load8(row + c) - norm.centre) * norm.inv_half);
    quantize_nuq(u.data(), n, thresholds, cal.levels() - 1, codes.data());
    pack_codes(codes.data(), n, plan.bits(), out);
    out += packed_bytes(n, plan.bits());
  }
  return out;
}

CODEC_CLONES const std::byte* decode_values(const block_plan& plan, const kvquant_calibration& cal,
                                            slab_ref s, const std::byte* in, float* x) {
  const uint32_t n = plan.shape.head_dim;
  const float* levels = cal.value_levels.data() + size_t{s.layer} * cal.levels();
  row_codes codes;
  for (uint32_t t = plan.full_first; t < plan.tokens; ++t) {
    const float centre = from_fp16(get<uint16_t>(in));
    const float half_range = from_fp16(get<uint16_t>(in));
    const std::byte* outliers = in;
    in += plan.outliers * (1 + sizeof(float));
    unpack_codes(in, n, plan.bits(), codes.data());
    in += packed_bytes(n, plan.bits());
    float* row = x + size_t{t} * n;
    dequantize_nuq(codes.data(), levels, &centre, &half_range, 0, n, row);
    if (!patch_outliers(outliers, plan.outliers, n, row))
      return nullptr;
  }
  return in;
}

} // namespace

size_t kvquant_payload_bytes(const block_plan& plan) {
  const size_t sinks = size_t{plan.full_first} * plan.shape.head_dim * sizeof(float);
  const size_t quantized = plan.tokens - plan.full_first;
  const size_t per_head = 2 * sinks + quantized * (record_bytes(plan, 0) + record_bytes(plan, 1));
  return size_t{plan.shape.layers} * plan.shape.kv_heads * per_head;
}

std::byte* kvquant_encode_slab(const block_plan& plan, const kvquant_calibration& cal, slab_id id,
                               const float* slab, const float* next_slab, std::byte* out) {
  out = put_rows(slab, plan.full_first, plan.shape.head_dim, out);
  return id.kind == 0 ? encode_keys(plan, cal, {id.layer, id.kv_head, next_slab}, slab, out)
                      : encode_values(plan, cal, {id.layer, id.kv_head, next_slab}, slab, out);
}

bool kvquant_decode(const block_plan& plan, const kvquant_calibration& cal, const std::byte* in,
                    float* page) {
  const uint32_t n = plan.shape.head_dim;
  for (uint32_t l = 0; l < plan.shape.layers; ++l)
    for (uint32_t kind = 0; kind < 2; ++kind)
      for (uint32_t g = 0; g < plan.shape.kv_heads; ++g) {
        float* x = page + plan.shape.slab_offset(l, kind, g);
        in = get_rows(in, plan.full_first, n, x);
        in = kind == 0 ? decode_keys(plan, cal, {l, g}, in, x)
                       : decode_values(plan, cal, {l, g}, in, x);
        if (in == nullptr)
          return false;
      }
  return true;
}

} // namespace crescent::storage::codec::detail
