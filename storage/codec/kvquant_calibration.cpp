// Fitting KVQuant's calibration (kvquant_calibration.hpp): key ranges, per-layer datatypes by
// 1-D k-means, RoPE tables, the hash.
#include "storage/codec/kvquant_calibration.hpp"

#include "messages/errors.hpp"
#include "storage/codec/kvquant_rows.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <string>

namespace crescent::storage::codec {

using std::to_string;

namespace {

caf::error bad(std::string what) {
  return make_error(errc::invalid_argument, "kvquant calibration: " + std::move(what));
}

caf::error check_inputs(const kv_shape& shape, const calibration_options& o,
                        std::span<const calibration_block> blocks) {
  if (o.bits != 3 && o.bits != 4)
    return bad("bits " + to_string(o.bits) + " (3 or 4)");
  if (o.sink_tokens > codec_sink_tokens_max)
    return bad("sink_tokens " + to_string(o.sink_tokens) + " above " +
               to_string(codec_sink_tokens_max));
  if (o.positions_max == 0 || o.positions_max > kvquant_positions_max)
    return bad("positions_max " + to_string(o.positions_max) + " outside [1, 2^17]");
  if (!std::isfinite(o.rope_theta) || o.rope_theta <= 1.0f)
    return bad("rope_theta must be finite and above 1");
  for (const auto& b : blocks) {
    if (b.page.size() != shape.page_floats() || b.tokens == 0 || b.tokens > shape.block_tokens)
      return bad("a block of the wrong size or token count");
    if (uint64_t{b.first_position} + b.tokens > o.positions_max)
      return bad("a block past positions_max");
    for (size_t slab = 0; slab < size_t{shape.layers} * 2 * shape.kv_heads; ++slab) {
      const float* x = b.page.data() + slab * shape.slab_floats();
      if (!std::all_of(x, x + size_t{b.tokens} * shape.head_dim,
                       [](float v) { return std::isfinite(v); }))
        return bad("a NaN or an infinity in a calibration page");
    }
  }
  return {};
}

// cos and sin of position x theta^(-2i / head_dim), in double, as the engine's RoPE.
void fill_rope(kvquant_calibration& cal) {
  const uint32_t half = cal.shape.head_dim / 2;
  cal.rope_cos.resize(size_t{cal.positions_max} * half);
  cal.rope_sin.resize(cal.rope_cos.size());
  for (uint32_t i = 0; i < half; ++i) {
    const double inv_freq =
        std::pow(static_cast<double>(cal.rope_theta), -2.0 * i / cal.shape.head_dim);
    for (size_t p = 0; p < cal.positions_max; ++p) {
      cal.rope_cos[p * half + i] = static_cast<float>(std::cos(static_cast<double>(p) * inv_freq));
      cal.rope_sin[p * half + i] = static_cast<float>(std::sin(static_cast<double>(p) * inv_freq));
    }
  }
}

// Calls f(block, token, row) for every calibration token that is not a sink, in order.
template <class F>
void for_each_row(const kvquant_calibration& cal, std::span<const calibration_block> blocks,
                  uint32_t layer, uint32_t kind, uint32_t kv_head, F&& f) {
  for (const auto& b : blocks) {
    const float* slab = b.page.data() + cal.shape.slab_offset(layer, kind, kv_head);
    for (uint32_t t = 0; t < b.tokens; ++t)
      if (b.first_position + t >= cal.sink_tokens)
        f(b.first_position + t, slab + size_t{t} * cal.shape.head_dim);
  }
}

// Per channel of (layer, kv_head): the 0.5% and 99.5% quantiles of the pre-RoPE keys.
void fit_key_ranges(kvquant_calibration& cal, std::span<const calibration_block> blocks,
                    uint32_t layer, uint32_t kv_head) {
  const uint32_t n = cal.shape.head_dim, half = n / 2;
  std::vector<float> pre; // [row][n]
  std::array<float, codec_head_dim_max> row{};
  for_each_row(cal, blocks, layer, 0, kv_head, [&](uint32_t p, const float* x) {
    detail::unrotate(x, cal.rope_cos.data() + size_t{p} * half,
                     cal.rope_sin.data() + size_t{p} * half, n, row.data());
    pre.insert(pre.end(), row.begin(), row.begin() + n);
  });
  const size_t rows = pre.size() / n;
  std::vector<float> column(rows);
  const size_t lo_rank = static_cast<size_t>(0.005 * static_cast<double>(rows - 1));
  const size_t hi_rank = rows - 1 - lo_rank;
  const size_t off = cal.channel_offset(layer, kv_head);
  for (uint32_t c = 0; c < n; ++c) {
    for (size_t r = 0; r < rows; ++r)
      column[r] = pre[r * n + c];
    std::nth_element(column.begin(), column.begin() + lo_rank, column.end());
    const float lo = column[lo_rank];
    std::nth_element(column.begin(), column.begin() + hi_rank, column.end());
    const float hi = column[hi_rank];
    cal.key_centre[off + c] = 0.5f * lo + 0.5f * hi;
    // A channel that never varies still needs a positive range to divide by.
    const float floor = std::max(std::fabs(cal.key_centre[off + c]), 1.0f) * 1e-6f;
    cal.key_half_range[off + c] = std::max(0.5f * hi - 0.5f * lo, floor);
    cal.key_inv_half_range[off + c] = 1.0f / cal.key_half_range[off + c];
  }
}

// Appends the normalized elements the encoder would quantize in one key or value vector: the
// outliers left out, the rest clamped to [-1, 1] (what falls beyond gets the end level anyway).
void add_samples(const kvquant_calibration& cal, uint32_t layer, uint32_t kind, uint32_t kv_head,
                 uint32_t position, const float* x, std::vector<float>& samples) {
  const uint32_t n = cal.shape.head_dim, half = n / 2;
  const uint32_t k = kvquant_outliers_per_vector(n);
  std::array<float, codec_head_dim_max> u{}, scratch{};
  std::array<uint8_t, detail::kvquant_outliers_max> index{};
  if (kind == 0) {
    const size_t off = cal.channel_offset(layer, kv_head);
    detail::unrotate(x, cal.rope_cos.data() + size_t{position} * half,
                     cal.rope_sin.data() + size_t{position} * half, n, u.data());
    for (uint32_t c = 0; c < n; ++c)
      u[c] = (u[c] - cal.key_centre[off + c]) * cal.key_inv_half_range[off + c];
    detail::top_magnitudes(u.data(), n, k, scratch.data(), index.data());
  } else {
    detail::top_magnitudes(x, n, k, scratch.data(), index.data());
    const auto norm = detail::normalize_value(x, n, index.data(), k);
    for (uint32_t c = 0; c < n; ++c)
      u[c] = (x[c] - norm.centre) * norm.inv_half;
  }
  for (uint32_t c = 0; c < n; ++c)
    if (std::find(index.begin(), index.begin() + k, c) == index.begin() + k)
      samples.push_back(std::clamp(u[c], -1.0f, 1.0f));
}

// Lloyd's algorithm in one dimension on sorted samples: each cluster is a run of the sorted
// samples, so a round is a binary search per boundary and a prefix-sum difference per mean.
std::vector<float> kmeans_levels(std::vector<float>& samples, uint32_t levels) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + samples[i];
  std::vector<double> centre(levels);
  for (uint32_t j = 0; j < levels; ++j)
    centre[j] = samples[std::min(n - 1, static_cast<size_t>((j + 0.5) / levels * n))];
  for (uint32_t round = 0; round < kvquant_kmeans_rounds; ++round) {
    size_t first = 0;
    for (uint32_t j = 0; j < levels; ++j) {
      size_t end = n;
      if (j + 1 < levels) {
        const double boundary = 0.5 * (centre[j] + centre[j + 1]);
        end = static_cast<size_t>(
            std::upper_bound(samples.begin() + first, samples.end(), boundary) - samples.begin());
      }
      if (end > first)
        centre[j] = (prefix[end] - prefix[first]) / static_cast<double>(end - first);
      first = end;
    }
    std::sort(centre.begin(), centre.end());
  }
  return {centre.begin(), centre.end()};
}

// At most kvquant_samples_max samples, every m-th one: deterministic and spread over all.
void thin(std::vector<float>& samples) {
  if (samples.size() <= kvquant_samples_max)
    return;
  const size_t stride = (samples.size() + kvquant_samples_max - 1) / kvquant_samples_max;
  size_t kept = 0;
  for (size_t i = 0; i < samples.size(); i += stride)
    samples[kept++] = samples[i];
  samples.resize(kept);
}

void fit_levels(kvquant_calibration& cal, std::span<const calibration_block> blocks,
                uint32_t layer) {
  for (uint32_t kind = 0; kind < 2; ++kind) {
    std::vector<float> samples;
    for (uint32_t g = 0; g < cal.shape.kv_heads; ++g)
      for_each_row(cal, blocks, layer, kind, g, [&](uint32_t p, const float* x) {
        add_samples(cal, layer, kind, g, p, x, samples);
      });
    thin(samples);
    const auto levels = kmeans_levels(samples, cal.levels());
    auto& table = kind == 0 ? cal.key_levels : cal.value_levels;
    auto& thresholds = kind == 0 ? cal.key_thresholds : cal.value_thresholds;
    std::copy(levels.begin(), levels.end(), table.begin() + size_t{layer} * cal.levels());
    for (uint32_t j = 0; j + 1 < cal.levels(); ++j)
      thresholds[size_t{layer} * (cal.levels() - 1) + j] = 0.5f * levels[j] + 0.5f * levels[j + 1];
  }
}

uint64_t hash_of(const kvquant_calibration& cal) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  const uint32_t head[] = {cal.bits,           cal.shape.layers,       cal.shape.kv_heads,
                           cal.shape.head_dim, cal.shape.block_tokens, cal.sink_tokens,
                           cal.positions_max};
  XXH3_64bits_update(state, head, sizeof head);
  XXH3_64bits_update(state, &cal.rope_theta, sizeof cal.rope_theta);
  for (const auto* table :
       {&cal.key_levels, &cal.value_levels, &cal.key_centre, &cal.key_half_range})
    XXH3_64bits_update(state, table->data(), table->size() * sizeof(float));
  const uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

void allocate(kvquant_calibration& cal) {
  const size_t channels = size_t{cal.shape.layers} * cal.shape.kv_heads * cal.shape.head_dim;
  cal.key_centre.resize(channels);
  cal.key_half_range.resize(channels);
  cal.key_inv_half_range.resize(channels);
  cal.key_levels.resize(size_t{cal.shape.layers} * cal.levels());
  cal.value_levels.resize(cal.key_levels.size());
  cal.key_thresholds.resize(size_t{cal.shape.layers} * (cal.levels() - 1));
  cal.value_thresholds.resize(cal.key_thresholds.size());
}

bool has_rows(const kvquant_calibration& cal, std::span<const calibration_block> blocks) {
  for (const auto& b : blocks)
    if (b.first_position + b.tokens > cal.sink_tokens)
      return true;
  return false;
}

} // namespace

uint32_t kvquant_outliers_per_vector(uint32_t head_dim) {
  return std::max(1u, (head_dim + 50) / 100);
}

caf::expected<std::shared_ptr<const kvquant_calibration>>
calibrate_kvquant(const kv_shape& shape, const calibration_options& options,
                  std::span<const calibration_block> blocks) {
  codec_config probe{codec_kind::none, shape};
  if (auto err = validate(probe))
    return err;
  if (auto err = check_inputs(shape, options, blocks))
    return err;
  try {
    auto cal = std::make_shared<kvquant_calibration>();
    cal->bits = options.bits;
    cal->shape = shape;
    cal->rope_theta = options.rope_theta;
    cal->sink_tokens = options.sink_tokens;
    cal->positions_max = options.positions_max;
    if (!has_rows(*cal, blocks))
      return bad("no token past the sinks to fit from");
    allocate(*cal);
    fill_rope(*cal);
    for (uint32_t l = 0; l < shape.layers; ++l) {
      for (uint32_t g = 0; g < shape.kv_heads; ++g)
        fit_key_ranges(*cal, blocks, l, g);
      fit_levels(*cal, blocks, l);
    }
    cal->hash = hash_of(*cal);
    return std::shared_ptr<const kvquant_calibration>{std::move(cal)};
  } catch (const std::bad_alloc&) {
    return make_error(errc::no_space, "kvquant calibration: not enough memory");
  }
}

caf::expected<std::shared_ptr<const kvquant_calibration>>
kvquant_layers(const kvquant_calibration& cal, uint32_t first, uint32_t count) {
  if (count == 0 || first >= cal.shape.layers || count > cal.shape.layers - first)
    return bad("layers [" + std::to_string(first) + ", " + std::to_string(first + count) +
               ") of a calibration of " + std::to_string(cal.shape.layers));
  auto out = std::make_shared<kvquant_calibration>(cal);
  out->shape.layers = count;
  // Every per-layer table is [layer][...]: the range is one contiguous run of each.
  auto cut = [&](std::vector<float>& table) {
    const size_t per_layer = table.size() / cal.shape.layers;
    table = std::vector<float>(table.begin() + static_cast<ptrdiff_t>(first * per_layer),
                               table.begin() + static_cast<ptrdiff_t>((first + count) * per_layer));
  };
  for (auto* table : {&out->key_levels, &out->value_levels, &out->key_centre, &out->key_half_range,
                      &out->key_inv_half_range, &out->key_thresholds, &out->value_thresholds})
    cut(*table);
  out->hash = hash_of(*out);
  return std::shared_ptr<const kvquant_calibration>{std::move(out)};
}

} // namespace crescent::storage::codec
