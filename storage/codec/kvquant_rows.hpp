// Private to storage/codec/: what KVQuant's encoder and its calibration do to one head vector
// alike (un-rotating a key, normalizing, choosing the outliers), so that the calibration fits
// its datatypes to exactly what the encoder will quantize.
#pragma once

#include "storage/codec/codec_internal.hpp"
#include "storage/codec/kvquant_calibration.hpp"

#include <algorithm>
#include <array>

namespace crescent::storage::codec::detail {

inline constexpr uint32_t kvquant_outliers_max = 3; // round(1% of 256)

/// The engine rotates channel pairs (i, i + head_dim / 2) by the position's angles (a' = a cos
/// - b sin, b' = b cos + a sin); this undoes it.
CODEC_INLINE void unrotate(const float* post, const float* cos, const float* sin, uint32_t n,
                           float* pre) {
  const uint32_t half = n / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const float a = post[i], b = post[i + half];
    pre[i] = a * cos[i] + b * sin[i];
    pre[i + half] = b * cos[i] - a * sin[i];
  }
}

CODEC_INLINE void rotate(const float* pre, const float* cos, const float* sin, uint32_t n,
                         float* post) {
  const uint32_t half = n / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const float a = pre[i], b = pre[i + half];
    post[i] = a * cos[i] - b * sin[i];
    post[i + half] = b * cos[i] + a * sin[i];
  }
}

/// Index of the largest of n floats, or of their magnitudes with `magnitude` (n a multiple of
/// 8), the first on ties. Two branch-free passes, the maximum and then the smallest index that
/// holds it: cheaper than carrying indices along with a running maximum, which made this
/// search a third of KVQuant's encode.
template <bool magnitude>
CODEC_INLINE uint32_t argmax_row(const float* a, uint32_t n) {
  auto at = [a](uint32_t c) { return magnitude ? abs8(load8(a + c)) : load8(a + c); };
  float8 top = at(0);
  for (uint32_t c = 8; c < n; c += 8)
    top = max8(top, at(c));
  const float8 m = splat8(hmax8(top));
  const int32x8 none = int32x8{} + static_cast<int32_t>(n);
  int32x8 index = {0, 1, 2, 3, 4, 5, 6, 7};
  int32x8 first = none;
  for (uint32_t c = 0; c < n; c += 8, index += 8) {
    const int32x8 hit = at(c) == m ? index : none;
    first = hit < first ? hit : first;
  }
  int32_t i = first[0];
  for (int lane = 1; lane < 8; ++lane)
    i = first[lane] < i ? first[lane] : i;
  return static_cast<uint32_t>(i);
}

/// The k largest of |x[c]| (k at most kvquant_outliers_max), largest first, the first index on
/// ties; `scratch` is overwritten when k > 1.
CODEC_INLINE void top_magnitudes(const float* x, uint32_t n, uint32_t k, float* scratch,
                                 uint8_t* index) {
  if (k == 1) { // every head_dim from 16 to 149: no copy to mark the picks in
    index[0] = static_cast<uint8_t>(argmax_row<true>(x, n));
    return;
  }
  for (uint32_t c = 0; c < n; c += 8)
    store8(scratch + c, abs8(load8(x + c)));
  for (uint32_t r = 0; r < k; ++r) {
    const uint32_t i = argmax_row<false>(scratch, n);
    index[r] = static_cast<uint8_t>(i);
    scratch[i] = -1.0f;
  }
}

/// Codes of a row of n values (n a multiple of 8, at most codec_head_dim_max): code = the number
/// of the `count` ascending thresholds below u (strictly), which is u's nearest level. The count
/// is a template argument so that the thresholds sit in registers and the compare loop unrolls.
template <uint32_t count>
CODEC_INLINE void quantize_nuq_n(const float* u, uint32_t n, const float* thresholds,
                                 uint8_t* codes) {
  float8 t[count];
  for (uint32_t j = 0; j < count; ++j)
    t[j] = splat8(thresholds[j]);
  std::array<int32_t, codec_head_dim_max> wide;
  // One compare with the middle threshold picks the half of the codebook, then the half's
  // thresholds are counted: count / 2 + 1 compares and count / 2 blends instead of count
  // compares (the same code: thresholds ascend).
  constexpr uint32_t half = (count + 1) / 2;
  for (uint32_t c = 0; c < n; c += 8) {
    const float8 v = load8(u + c);
    const int32x8 upper = v > t[half - 1];
    int32x8 q = upper & static_cast<int32_t>(half);
    for (uint32_t j = 0; j + 1 < half; ++j)
      q -= v > (upper ? t[half + j] : t[j]);
    std::memcpy(wide.data() + c, &q, sizeof q);
  }
  narrow_row(wide.data(), n, codes);
}

/// The same count for 15 thresholds (4 bits) in two steps of three compares: which quarter of the
/// codebook (t[3], t[7], t[11] below u), then which of that quarter's t[4q], t[4q + 1], t[4q + 2]
/// (a lane permute picks each quarter's threshold: three tables of four). Fewer operations than
/// the halving above, and six vectors of thresholds instead of fifteen, which spilled: kvquant4
/// encodes 6% to 10% faster, to the same bytes.
CODEC_INLINE void quantize_nuq_15(const float* u, uint32_t n, const float* t, uint8_t* codes) {
  const float8 b3 = splat8(t[3]), b7 = splat8(t[7]), b11 = splat8(t[11]);
  const float8 in0 = {t[0], t[4], t[8], t[12], t[0], t[4], t[8], t[12]};
  const float8 in1 = {t[1], t[5], t[9], t[13], t[1], t[5], t[9], t[13]};
  const float8 in2 = {t[2], t[6], t[10], t[14], t[2], t[6], t[10], t[14]};
  std::array<int32_t, codec_head_dim_max> wide;
  for (uint32_t c = 0; c < n; c += 8) {
    const float8 v = load8(u + c);
    const int32x8 q = -((v > b3) + (v > b7) + (v > b11)); // compares give -1 for true
    const int32x8 r = (v > __builtin_shuffle(in0, q)) + (v > __builtin_shuffle(in1, q)) +
                      (v > __builtin_shuffle(in2, q));
    const int32x8 code = (q << 2) - r;
    std::memcpy(wide.data() + c, &code, sizeof code);
  }
  narrow_row(wide.data(), n, codes);
}

/// The codes of a row against a layer's 7 (3 bits) or 15 (4 bits) thresholds.
CODEC_INLINE void quantize_nuq(const float* u, uint32_t n, const float* thresholds, uint32_t count,
                               uint8_t* codes) {
  if (count == 15)
    quantize_nuq_15(u, n, thresholds, codes);
  else
    quantize_nuq_n<7>(u, n, thresholds, codes);
}

/// The normalization of a value vector: centre and half-range of its elements other than the
/// outliers, as fp16 (half-range rounded up, so that every non-outlier lands in [-1, 1]).
struct value_norm {
  uint16_t centre_h = 0, half_h = 0;
  float centre = 0.0f, inv_half = 0.0f;
};

CODEC_INLINE value_norm normalize_value(const float* x, uint32_t n, const uint8_t* outliers,
                                        uint32_t k) {
  // Outliers are skipped by standing in for them with a non-outlier of the row, x[keep]: its
  // value changes neither the min nor the max of the rest. Lanes are swapped in by index
  // compares rather than by patching a copy, whose reload would stall on the patched store.
  uint32_t keep = 0;
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t i = 0; i < k; ++i)
      if (outliers[i] == keep)
        ++keep;
  const float8 stand_in = splat8(x[keep]);
  int32x8 skip[kvquant_outliers_max];
  for (uint32_t r = 0; r < k; ++r)
    skip[r] = int32x8{} + static_cast<int32_t>(outliers[r]);
  int32x8 index = {0, 1, 2, 3, 4, 5, 6, 7};
  float8 lo = splat8(x[keep]), hi = lo;
  for (uint32_t c = 0; c < n; c += 8, index += 8) {
    float8 v = load8(x + c);
    for (uint32_t r = 0; r < k; ++r)
      v = index == skip[r] ? stand_in : v;
    lo = min8(lo, v);
    hi = max8(hi, v);
  }
  const float l = hmin8(lo), h = hmax8(hi);
  value_norm v;
  v.centre_h = to_fp16(0.5f * l + 0.5f * h);
  v.centre = from_fp16(v.centre_h);
  const float reach = std::max(h - v.centre, v.centre - l);
  v.half_h = fp16_at_least(reach);
  const float half = from_fp16(v.half_h);
  v.inv_half = half > 0.0f ? 1.0f / half : 0.0f;
  return v;
}

} // namespace crescent::storage::codec::detail
