// Private to storage/codec/: the block plan every format derives from its header, fp16
// conversion, code packing and the vector helpers of the hot loops.
#pragma once

#include "storage/codec/kv_codec.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

// The hot loops are also compiled for AVX2 and picked at load time where the CPU has it (as in
// gpu/reference_simd.hpp); helpers they call are forced inline so that the AVX2 copy uses AVX2
// throughout. Rows are a multiple of 8 floats, so every loop works in whole float8 vectors.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(CRESCENT_NO_VECTOR_CLONES)
#define CODEC_CLONES __attribute__((target_clones("avx2", "default")))
#define CODEC_INLINE __attribute__((always_inline)) inline
#else
#define CODEC_CLONES
#define CODEC_INLINE inline
#endif

namespace crescent::storage::codec::detail {

static_assert(std::endian::native == std::endian::little, "formats are little-endian");

typedef float float8 __attribute__((vector_size(32)));
typedef int32_t int32x8 __attribute__((vector_size(32)));

CODEC_INLINE float8 load8(const float* p) {
  float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

CODEC_INLINE void store8(float* p, const float8& v) {
  std::memcpy(p, &v, sizeof v);
}

CODEC_INLINE float8 splat8(float x) {
  return float8{} + x;
}

CODEC_INLINE float8 min8(const float8& a, const float8& b) {
  return a < b ? a : b;
}

CODEC_INLINE float8 max8(const float8& a, const float8& b) {
  return a > b ? a : b;
}

CODEC_INLINE float8 abs8(const float8& a) {
  return a < 0.0f ? -a : a;
}

CODEC_INLINE float hmin8(const float8& v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i)
    m = v[i] < m ? v[i] : m;
  return m;
}

CODEC_INLINE float hmax8(const float8& v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i)
    m = v[i] > m ? v[i] : m;
  return m;
}

/// Codes of a row: round(v + 0.5) truncated (v finite, at least -0.5 after the clamp), clamped
/// to [0, top]. Written as a plain loop on purpose: g++ vectorizes it with the pack
/// instructions that narrow int32 lanes to bytes, where lane-by-lane stores from a float8 cost
/// more than the arithmetic.
CODEC_INLINE void codes_of_row(const float* v, uint32_t n, float top, uint8_t* codes) {
  for (uint32_t c = 0; c < n; ++c) {
    float x = v[c] + 0.5f;
    x = x < 0.0f ? 0.0f : x;
    x = x > top + 0.25f ? top + 0.25f : x;
    codes[c] = static_cast<uint8_t>(static_cast<int32_t>(x));
  }
}

/// Int32 lanes to bytes, a row at a time (vectorized as above).
CODEC_INLINE void narrow_row(const int32_t* q, uint32_t n, uint8_t* codes) {
  for (uint32_t c = 0; c < n; ++c)
    codes[c] = static_cast<uint8_t>(q[c]);
}

// IEEE half precision, round to nearest even (software: F16C is not assumed). Callers keep
// magnitudes at most fp16_max, so overflow is not expected; it gives infinity.
inline constexpr float fp16_max = 65504.0f;

inline uint16_t to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) // rounds to 65536 or more
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) { // below 2^-14: a subnormal half, in units of 2^-24
    const float units = std::bit_cast<float>(abs) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(units)));
  }
  uint32_t r = abs - (112u << 23); // exponent bias 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

inline float from_fp16(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f; // 2^-24
    return sign ? -v : v;
  }
  if (exponent == 31)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/// The fp16 value nearest x from below (at_most) or above (at_least): a zero point at most the
/// smallest element and a step at least the one needed keep every code within its range.
inline uint16_t fp16_at_most(float x) {
  uint16_t h = to_fp16(x);
  if (from_fp16(h) > x)
    h = (h & 0x8000u) ? static_cast<uint16_t>(h + 1) : (h == 0 ? 0x8001u : h - 1);
  return h;
}

inline uint16_t fp16_at_least(float x) {
  uint16_t h = to_fp16(x);
  if (from_fp16(h) < x)
    h = (h & 0x8000u) ? (h == 0x8000u ? 1u : h - 1) : static_cast<uint16_t>(h + 1);
  return h;
}

/// Bytes of a row of n codes of `bits` bits (n a multiple of 8).
constexpr size_t packed_bytes(uint32_t n, uint32_t bits) {
  return size_t{n} * bits / 8;
}

/// Packs a row of n codes (n a multiple of 8). So that both directions vectorize, a byte holds
/// codes a fixed stride apart, not neighbours: 4 bits: byte i holds codes i (low nibble) and
/// i + n/2; 2 bits: codes i + j n/4 at bits 2j; 3 bits: the low two bits as a 2-bit row, then
/// bit 2 as a plane in which byte i holds codes i + j n/8 at bit j.
void pack_codes(const uint8_t* codes, uint32_t n, uint32_t bits, std::byte* out);
void unpack_codes(const std::byte* in, uint32_t n, uint32_t bits, uint8_t* codes);

/// Little-endian scalar stores and loads at any alignment.
template <class T>
inline void put(std::byte*& at, T value) {
  std::memcpy(at, &value, sizeof value);
  at += sizeof value;
}

template <class T>
inline T get(const std::byte*& at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  at += sizeof value;
  return value;
}

/// Everything about a block's format that its header implies: both sides compute it, the
/// encoder from its config, the decoder from the header, and they must agree.
struct block_plan {
  codec_kind kind = codec_kind::none;
  kv_shape shape;
  uint32_t tokens = 0;
  uint32_t first_position = 0;
  bool last = false;
  uint32_t group_tokens = 0; // KIVI: the configured group (as in the header)
  uint32_t key_group = 0;    // KIVI: tokens per key group, min(group, block_tokens)
  uint32_t value_group = 0;  // KIVI: channels per value group, min(group, head_dim)
  uint32_t full_first = 0;   // KVQuant: leading tokens kept float32 (sinks)
  uint32_t full_last = 0;    // KIVI: trailing tokens kept float32 (residual)
  uint32_t outliers = 0;     // KVQuant: exact elements per head vector
  uint64_t calibration_hash = 0;
  size_t payload_bytes = 0;

  uint32_t bits() const { return codec_bits(kind); }
  /// Tokens of a slab that are quantized (not kept float32).
  uint32_t quantized_tokens() const { return tokens - full_first - full_last; }
};

/// The plan of one block; kind-specific fields from group_tokens / sink_tokens / head_dim.
block_plan make_plan(codec_kind kind, const kv_shape& shape, uint32_t group_tokens,
                     uint32_t sink_tokens, uint32_t tokens, uint32_t first_position, bool last);

/// Slab `slab` of a page in page order ([layer][K|V][kv_head]) as (layer, K=0 | V=1, kv_head).
struct slab_id {
  uint32_t layer = 0, kind = 0, kv_head = 0;
};

inline slab_id slab_of(const kv_shape& s, size_t slab) {
  return {static_cast<uint32_t>(slab / (2 * s.kv_heads)),
          static_cast<uint32_t>(slab / s.kv_heads % 2), static_cast<uint32_t>(slab % s.kv_heads)};
}

// Per family: payload bytes, an encoder of one slab (every format lays its payload out slab
// after slab in page order, so the caller checks a slab's values and encodes it while it is
// still in cache; it returns the end of what it wrote), and a decoder of the whole payload.
// Encoders write exactly plan.payload_bytes over all slabs; decoders read exactly that and
// write the valid tokens of every slab of `page` (the caller zeroes the rest). Inputs are
// finite and within fp16 range.
size_t none_payload_bytes(const block_plan& plan);
std::byte* none_encode_slab(const block_plan& plan, const float* slab, std::byte* out);
void none_decode(const block_plan& plan, const std::byte* in, float* page);

size_t int8_payload_bytes(const block_plan& plan);
std::byte* int8_encode_slab(const block_plan& plan, const float* slab, std::byte* out);
void int8_decode(const block_plan& plan, const std::byte* in, float* page);

size_t kivi_payload_bytes(const block_plan& plan);
std::byte* kivi_encode_slab(const block_plan& plan, slab_id id, const float* slab, std::byte* out);
void kivi_decode(const block_plan& plan, const std::byte* in, float* page);

size_t kvquant_payload_bytes(const block_plan& plan);
std::byte* kvquant_encode_slab(const block_plan& plan, const kvquant_calibration& cal, slab_id id,
                               const float* slab, const float* next_slab, std::byte* out);
/// False for an outlier channel past head_dim (a forged block).
bool kvquant_decode(const block_plan& plan, const kvquant_calibration& cal, const std::byte* in,
                    float* page);

/// Copies the first `tokens` rows of a slab to or from float32 bytes (the formats' exact rows).
std::byte* put_rows(const float* rows, uint32_t tokens, uint32_t head_dim, std::byte* out);
const std::byte* get_rows(const std::byte* in, uint32_t tokens, uint32_t head_dim, float* rows);

} // namespace crescent::storage::codec::detail
