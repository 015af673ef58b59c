#include "gpu/reference_model.hpp"

#include "gpu/reference_math.hpp"

#include <cassert>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

namespace crescent::gpu::ref {

namespace {

// Tensor ids: each tensor draws from its own stream, so adding a tensor never shifts another.
constexpr uint64_t tensor_embedding = 1;
constexpr uint64_t tensor_final_norm = 2;
constexpr uint64_t tensor_lm_head = 3;
constexpr uint64_t tensor_layer_base = 16;
constexpr uint64_t tensors_per_layer = 8;

/// n values uniform in [center - bound, center + bound) from the stream (seed, tensor).
std::vector<float> draw(uint64_t seed, uint64_t tensor, size_t n, float center, float bound) {
  uint64_t mix = tensor;
  uint64_t state = seed ^ splitmix64(mix);
  std::vector<float> out(n);
  for (auto& value : out) {
    const double unit = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; // [0, 1)
    value = static_cast<float>(center + (2.0 * unit - 1.0) * bound);
  }
  return out;
}

float inv_sqrt(size_t fan_in) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
}

} // namespace

model::model(const model_config& cfg)
    : cfg_(cfg), layout_{cfg.kv_heads, cfg.block_tokens, cfg.head_dim()},
      qkv_cols_(size_t{cfg.d_model} + 2 * size_t{cfg.kv_dim()}), w_(draw_weights(cfg)),
      rope_(rope_for(cfg)), attention_(layout_, cfg.context_tokens_max) {
  const size_t d = cfg.d_model;
  x_.resize(rows_max * d);
  h_.resize(rows_max * d);
  qkv_.resize(rows_max * qkv_cols_);
  mixed_.resize(rows_max * d);
  proj_.resize(rows_max * d);
  gu_.resize(rows_max * 2 * size_t{cfg.ffn});
  act_.resize(rows_max * size_t{cfg.ffn});
  logits_.resize(cfg.vocab);
}

weights draw_weights(const model_config& cfg) {
  const uint64_t seed = cfg.seed;
  const size_t d = cfg.d_model;
  const size_t f = cfg.ffn;
  const size_t qkv_cols = d + 2 * size_t{cfg.kv_dim()};
  weights out;
  // Embedding entries of RMS ~0.58 and projections scaled by 1/sqrt(fan_in): every sublayer
  // adds a contribution of comparable size to the residual stream, so that logits depend on
  // context as well as on the current token, and nothing grows with depth.
  out.embedding = draw(seed, tensor_embedding, size_t{cfg.vocab} * d, 0.0f, 1.0f);
  out.final_norm = draw(seed, tensor_final_norm, d, 1.0f, 0.1f);
  out.lm_head = draw(seed, tensor_lm_head, d * cfg.vocab, 0.0f, inv_sqrt(d));
  out.layers.resize(cfg.layers);
  for (uint64_t l = 0; l < cfg.layers; ++l) {
    const uint64_t t = tensor_layer_base + l * tensors_per_layer;
    auto& w = out.layers[l];
    w.attn_norm = draw(seed, t + 0, d, 1.0f, 0.1f);
    w.wqkv = draw(seed, t + 1, d * qkv_cols, 0.0f, inv_sqrt(d));
    w.wo = draw(seed, t + 2, d * d, 0.0f, inv_sqrt(d));
    w.ffn_norm = draw(seed, t + 3, d, 1.0f, 0.1f);
    w.wgu = draw(seed, t + 4, d * 2 * f, 0.0f, inv_sqrt(d));
    w.wdown = draw(seed, t + 5, f * d, 0.0f, inv_sqrt(f));
  }
  return out;
}

namespace {

struct rope_key {
  uint32_t head_dim, context_tokens;
  double theta;
  auto operator<=>(const rope_key&) const = default;
};

// angle(pos, i) = pos * theta^(-2i / head_dim), computed in double by our own exp/log/sincos
// so that the tables are identical on every machine.
std::shared_ptr<const rope_tables> make_rope(const rope_key& k) {
  const uint32_t half = k.head_dim / 2;
  const double log_theta = log_d(k.theta);
  std::vector<double> inv_freq(half);
  for (uint32_t i = 0; i < half; ++i)
    inv_freq[i] = exp_d(-(2.0 * i / k.head_dim) * log_theta);
  auto t = std::make_shared<rope_tables>();
  t->cos.resize(size_t{k.context_tokens} * half);
  t->sin.resize(t->cos.size());
  for (size_t pos = 0; pos < k.context_tokens; ++pos) {
    for (uint32_t i = 0; i < half; ++i) {
      double s = 0.0;
      double c = 0.0;
      sincos_d(static_cast<double>(pos) * inv_freq[i], s, c);
      t->cos[pos * half + i] = static_cast<float>(c);
      t->sin[pos * half + i] = static_cast<float>(s);
    }
  }
  return t;
}

} // namespace

// The tables depend on three numbers only, and a cluster makes an engine per worker (a chaos
// campaign, per worker and seed): each distinct table is computed once per process and kept,
// read-only, for every model that needs it; past rope_tables_kept distinct ones (a process
// that tries many shapes), a model computes its own.
std::shared_ptr<const rope_tables> rope_for(const model_config& cfg) {
  constexpr size_t rope_tables_kept = 8;
  static std::mutex lock;
  static std::map<rope_key, std::shared_ptr<const rope_tables>> kept;
  const rope_key key{cfg.head_dim(), cfg.context_tokens_max, cfg.rope_theta};
  std::lock_guard guard{lock};
  if (auto found = kept.find(key); found != kept.end())
    return found->second;
  auto made = make_rope(key);
  if (kept.size() < rope_tables_kept)
    kept.emplace(key, made);
  return made;
}

void model::store_kv(const token_row& row, uint32_t layer, const float* k, const float* v) const {
  const uint32_t bt = cfg_.block_tokens;
  const size_t hd = cfg_.head_dim();
  auto* page = reinterpret_cast<float*>(row.pages[row.position / bt]);
  const size_t slot = size_t{row.position % bt} * hd;
  for (uint32_t g = 0; g < cfg_.kv_heads; ++g) {
    std::memcpy(page + layout_.slab(layer, 0, g) + slot, k + g * hd, hd * sizeof(float));
    std::memcpy(page + layout_.slab(layer, 1, g) + slot, v + g * hd, hd * sizeof(float));
  }
}

void model::self_attention(const layer_weights& w, uint32_t layer,
                           std::span<const token_row> rows) {
  const size_t n = rows.size();
  const size_t d = cfg_.d_model;
  const uint32_t hd = cfg_.head_dim();
  const uint32_t half = hd / 2;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  rms_norm(x_.data(), n, d, w.attn_norm.data(), cfg_.norm_eps, h_.data());
  matmul(h_.data(), n, d, w.wqkv.data(), qkv_cols_, qkv_.data());
  // All rows' K and V go into the pages before any row attends: a row at position p reads
  // keys 0..p, some of which belong to earlier rows of this same group.
  for (size_t r = 0; r < n; ++r) {
    float* q = qkv_.data() + r * qkv_cols_;
    float* k = q + d;
    const float* v = k + cfg_.kv_dim();
    const float* cos = rope_->cos.data() + size_t{rows[r].position} * half;
    const float* sin = rope_->sin.data() + size_t{rows[r].position} * half;
    rope(q, cfg_.heads, hd, cos, sin);
    scale(q, d, q_scale);
    rope(k, cfg_.kv_heads, hd, cos, sin);
    store_kv(rows[r], layer, k, v);
  }
  attend_rows(layer, rows);
  matmul(mixed_.data(), n, d, w.wo.data(), d, proj_.data());
  add(x_.data(), proj_.data(), n * d);
}

namespace {

bool same_sequence(const token_row& a, const token_row& b) {
  return a.pages.data() == b.pages.data() && a.pages.size() == b.pages.size();
}

} // namespace

void model::attend_rows(uint32_t layer, std::span<const token_row> rows) {
  // Consecutive rows of one sequence (a prefill chunk) share lane groups, so that each key is
  // loaded once for up to attention::lanes_max queries; rows of different sequences (a decode
  // batch) each get their own. Which lanes are grouped changes no result.
  const uint32_t group = cfg_.heads / cfg_.kv_heads;
  const uint32_t hd = cfg_.head_dim();
  for (uint32_t g = 0; g < cfg_.kv_heads; ++g) {
    size_t first = 0; // the row whose pages the current lane group reads
    for (size_t r = 0; r < rows.size(); ++r) {
      if (!attention_.empty() &&
          (!same_sequence(rows[r], rows[first]) || rows[r].position < attention_.last_position())) {
        attention_.run(rows[first].pages, layer, g);
      }
      if (attention_.empty())
        first = r;
      for (uint32_t h = g * group; h < (g + 1) * group; ++h) {
        if (attention_.full()) {
          attention_.run(rows[first].pages, layer, g);
          first = r;
        }
        attention_.add_lane(qkv_.data() + r * qkv_cols_ + size_t{h} * hd,
                            mixed_.data() + r * cfg_.d_model + size_t{h} * hd, rows[r].position);
      }
    }
    attention_.run(rows[first].pages, layer, g);
  }
}

void model::feed_forward(const layer_weights& w, size_t n) {
  const size_t d = cfg_.d_model;
  const size_t f = cfg_.ffn;
  rms_norm(x_.data(), n, d, w.ffn_norm.data(), cfg_.norm_eps, h_.data());
  matmul(h_.data(), n, d, w.wgu.data(), 2 * f, gu_.data());
  for (size_t r = 0; r < n; ++r)
    swiglu(gu_.data() + r * 2 * f, gu_.data() + r * 2 * f + f, f, act_.data() + r * f);
  matmul(act_.data(), n, f, w.wdown.data(), d, proj_.data());
  add(x_.data(), proj_.data(), n * d);
}

void model::forward(std::span<const token_row> rows) {
  forward_layers(rows, 0, cfg_.layers, nullptr, nullptr);
}

void model::forward_layers(std::span<const token_row> rows, uint32_t first, uint32_t end,
                           const float* stream_in, float* stream_out) {
  assert(first < end && end <= cfg_.layers && (first == 0 || stream_in != nullptr));
  const size_t d = cfg_.d_model;
  if (first == 0)
    for (size_t r = 0; r < rows.size(); ++r)
      std::memcpy(x_.data() + r * d, w_.embedding.data() + size_t{rows[r].token} * d,
                  d * sizeof(float));
  else
    std::memcpy(x_.data(), stream_in, rows.size() * d * sizeof(float));
  for (uint32_t l = first; l < end; ++l) {
    self_attention(w_.layers[l], l, rows);
    feed_forward(w_.layers[l], rows.size());
  }
  if (stream_out != nullptr)
    std::memcpy(stream_out, x_.data(), rows.size() * d * sizeof(float));
}

uint32_t model::greedy(size_t r) {
  const size_t d = cfg_.d_model;
  rms_norm(x_.data() + r * d, 1, d, w_.final_norm.data(), cfg_.norm_eps, h_.data());
  matmul(h_.data(), 1, d, w_.lm_head.data(), cfg_.vocab, logits_.data());
  return argmax(logits_.data(), cfg_.vocab);
}

} // namespace crescent::gpu::ref
