// KVQuant's calibrated state: what kvquant3/4 encode and decode with, fitted from KV pages of a
// calibration run (crescent bench kv-codec runs the reference engine over a fixed, seeded
// prompt set; any source of pages will do).
//
// What is fitted, per KVQuant (Hooper et al., 2024), without its sensitivity (Fisher) weights:
//  - keys' per-channel ranges, offline: for each (layer, kv_head, channel) the 0.5% and 99.5%
//    quantiles of the pre-RoPE key values; a key element is normalized as (x - centre) /
//    half_range, so most fall in [-1, 1] and what falls outside is what the per-vector
//    outliers are for;
//  - the non-uniform datatypes, per layer, one for keys and one for values: 2^bits levels in
//    [-1, 1] from 1-D k-means (Lloyd, initialized at quantiles, a fixed number of rounds) over
//    the normalized elements the encoder would quantize (outliers and sinks left out; values
//    normalized per token by their own min and max, as the encoder does).
// A calibration is identified by a hash of all of it; blocks carry that hash, and a reader with
// another calibration refuses them (a miss), since the same codes mean other values under it.
//
// The RoPE tables (cos and sin of position x theta^(-2i / head_dim), computed in double) are
// kept here too, for positions [0, positions_max): keys are un-rotated before quantization and
// rotated back after decoding. They are std::sincos's, not the engine's own (gpu/
// reference_math.hpp), so a key round-trips through rotation with an error of a few float ulps,
// far below the quantization error.
#pragma once

#include "storage/codec/kv_codec.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace crescent::storage::codec {

inline constexpr uint32_t kvquant_positions_max = 1u << 17;    // as the reference engine's context
inline constexpr size_t kvquant_samples_max = size_t{1} << 22; // per (layer, K|V) k-means input
inline constexpr uint32_t kvquant_kmeans_rounds = 40;
/// Outliers kept per head vector: round(1% of head_dim), at least 1 (1 for 16 to 149 channels).
uint32_t kvquant_outliers_per_vector(uint32_t head_dim);

struct kvquant_calibration {
  uint32_t bits = 4; // 3 or 4
  kv_shape shape;
  float rope_theta = 10000.0f;
  uint32_t sink_tokens = 1; // positions [0, sink_tokens) are stored float32
  uint32_t positions_max = 0;
  std::vector<float> key_levels;     // [layer][2^bits], ascending, in [-1, 1]
  std::vector<float> value_levels;   // [layer][2^bits]
  std::vector<float> key_centre;     // [layer][kv_head][head_dim], pre-RoPE
  std::vector<float> key_half_range; // [layer][kv_head][head_dim], > 0
  std::vector<float> rope_cos;       // [position][head_dim / 2]
  std::vector<float> rope_sin;
  uint64_t hash = 0; // XXH3-64 of everything above but the RoPE tables (which theta fixes)
  // Derived from the above, for the encoder's inner loops.
  std::vector<float> key_inv_half_range; // 1 / key_half_range
  std::vector<float> key_thresholds;     // [layer][2^bits - 1]: midpoints between levels
  std::vector<float> value_thresholds;

  uint32_t levels() const { return 1u << bits; }
  /// Offset of (layer, kv_head)'s head_dim channels in the per-channel tables.
  size_t channel_offset(uint32_t layer, uint32_t kv_head) const {
    return (size_t{layer} * shape.kv_heads + kv_head) * shape.head_dim;
  }
};

/// What to fit from: pages with their valid tokens and first positions (as block_in).
struct calibration_block {
  std::span<const float> page;
  uint32_t tokens = 0;
  uint32_t first_position = 0;
};

struct calibration_options {
  uint32_t bits = 4;
  float rope_theta = 10000.0f;
  uint32_t sink_tokens = 1;
  uint32_t positions_max = 8192; // the model's context_tokens_max
};

/// Fits a calibration. Errors: shape or options outside the limits, a block of the wrong size
/// or past positions_max, a NaN or infinity, or no token to fit from (invalid_argument).
caf::expected<std::shared_ptr<const kvquant_calibration>>
calibrate_kvquant(const kv_shape& shape, const calibration_options& options,
                  std::span<const calibration_block> blocks);

/// The calibration of layers [first, first + count) of `cal` alone, for blocks that hold only
/// those layers of a page (a range of layers sent on its own: the layer-wise KV hand-off). Its
/// hash is its own. Errors: a range outside the calibration's layers (invalid_argument).
caf::expected<std::shared_ptr<const kvquant_calibration>>
kvquant_layers(const kvquant_calibration& cal, uint32_t first, uint32_t count);

} // namespace crescent::storage::codec
