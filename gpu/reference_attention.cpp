// Causal attention over paged KV (class attention in reference_kernels.hpp).
//
// Each lane's numbers are computed with one fixed sequence of operations:
//   score[j] = 0 + q[0] * k_j[0] + q[1] * k_j[1] + ...       (left to right)
//   top      = max over keys j = 0..position of score[j]
//   p[j]     = exp_f(score[j] - top)
//   total    = 0 + p[0] + p[1] + ...                          (keys in order)
//   acc[d]   = 0 + p[0] * v_0[d] + p[1] * v_1[d] + ...        (keys in order)
//   out[d]   = acc[d] / total
// The loops below only decide how many lanes (and keys) are in flight at once.
#include "gpu/reference_kernels.hpp"

#include "gpu/reference_math.hpp"
#include "gpu/reference_simd.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace crescent::gpu::ref {

namespace {

const float* floats(const std::byte* page) {
  return reinterpret_cast<const float*>(page);
}

// Scores of one key for all lanes: eight lanes at a time in a register across head_dim, then
// the remaining lanes one by one.
CRESCENT_INLINE void score_all_lanes(const float* __restrict qt, uint32_t lanes, uint32_t head_dim,
                                     const float* __restrict k, float* __restrict s) {
  const uint32_t vector_lanes = lanes - lanes % 8;
  for (uint32_t l = 0; l < vector_lanes; l += 8) {
    float8 acc = {};
    for (uint32_t d = 0; d < head_dim; ++d) {
      float8 q;
      load8(q, qt + size_t{d} * lanes + l);
      acc += q * k[d];
    }
    store8(s + l, acc);
  }
  for (uint32_t l = vector_lanes; l < lanes; ++l) {
    float acc = 0.0f;
    for (uint32_t d = 0; d < head_dim; ++d)
      acc += qt[size_t{d} * lanes + l] * k[d];
    s[l] = acc;
  }
}

// Scores of one key for lanes [live, lanes) only (the causal edge of a prefill group).
CRESCENT_INLINE void score_live_lanes(const float* __restrict qt, uint32_t lanes, uint32_t live,
                                      uint32_t head_dim, const float* __restrict k,
                                      float* __restrict s) {
  for (uint32_t l = live; l < lanes; ++l)
    s[l] = 0.0f;
  for (uint32_t d = 0; d < head_dim; ++d) {
    const float kd = k[d];
    const float* q = qt + size_t{d} * lanes;
    for (uint32_t l = live; l < lanes; ++l)
      s[l] += q[l] * kd;
  }
}

// top[l] = max(top[l], s[l]), written as a comparison so that it vectorizes.
CRESCENT_INLINE void raise_max(float* __restrict top, const float* __restrict s, uint32_t lanes,
                               uint32_t live) {
  for (uint32_t l = live; l < lanes; ++l)
    top[l] = top[l] < s[l] ? s[l] : top[l];
}

// Softmax numerators of one key in place, added to the lanes' denominators.
CRESCENT_INLINE void weigh(float* __restrict s, const float* __restrict top,
                           float* __restrict total, uint32_t lanes, uint32_t live) {
  for (uint32_t l = live; l < lanes; ++l) {
    s[l] = exp_f(s[l] - top[l]);
    total[l] += s[l];
  }
}

// acc[d][l] += p[l] * v[d] for one key and lanes [live, lanes).
CRESCENT_INLINE void mix_one_key(float* __restrict acc, uint32_t lanes, uint32_t live,
                                 uint32_t head_dim, const float* __restrict p,
                                 const float* __restrict v) {
  for (uint32_t d = 0; d < head_dim; ++d) {
    const float vd = v[d];
    float* a = acc + size_t{d} * lanes;
    for (uint32_t l = live; l < lanes; ++l)
      a[l] += p[l] * vd;
  }
}

// The same for four consecutive keys seen by all lanes: each acc element is loaded and stored
// once for the four, and still adds their terms in key order.
CRESCENT_INLINE void mix_four_keys(float* __restrict acc, uint32_t lanes, uint32_t head_dim,
                                   const float* const (&p)[4], const float* const (&v)[4]) {
  const float* __restrict p0 = p[0];
  const float* __restrict p1 = p[1];
  const float* __restrict p2 = p[2];
  const float* __restrict p3 = p[3];
  for (uint32_t d = 0; d < head_dim; ++d) {
    const float v0 = v[0][d], v1 = v[1][d], v2 = v[2][d], v3 = v[3][d];
    float* __restrict a = acc + size_t{d} * lanes;
    for (uint32_t l = 0; l < lanes; ++l)
      a[l] = (((a[l] + p0[l] * v0) + p1[l] * v1) + p2[l] * v2) + p3[l] * v3;
  }
}

// s[j] = q . k_j for the n keys in pages (one lane, every key).
CRESCENT_INLINE void score_lane(std::span<std::byte* const> pages, size_t k_slab,
                                uint32_t block_tokens, uint32_t head_dim, uint32_t n,
                                const float* __restrict q, float* __restrict s) {
  for (uint32_t first = 0, p = 0; first < n; first += block_tokens, ++p) {
    const float* k = floats(pages[p]) + k_slab;
    const uint32_t count = std::min(block_tokens, n - first);
    for (uint32_t j = 0; j < count; ++j, k += head_dim) {
      float acc = 0.0f;
      for (uint32_t d = 0; d < head_dim; ++d)
        acc += q[d] * k[d];
      s[first + j] = acc;
    }
  }
}

// acc[d] = sum over the n keys in order of p[j] * v_j[d], for one lane and the dimensions
// from d0 that fit in Acc: float8 keeps eight of them in one register across all keys.
template <class Acc>
CRESCENT_INLINE void mix_lane_dims(std::span<std::byte* const> pages, size_t v_slab,
                                   uint32_t block_tokens, uint32_t head_dim, uint32_t n,
                                   const float* __restrict p, uint32_t d0, float* __restrict acc) {
  Acc a = {};
  for (uint32_t first = 0, pg = 0; first < n; first += block_tokens, ++pg) {
    const float* v = floats(pages[pg]) + v_slab + d0;
    const uint32_t count = std::min(block_tokens, n - first);
    for (uint32_t j = 0; j < count; ++j, v += head_dim) {
      Acc vj;
      std::memcpy(&vj, v, sizeof vj);
      a += p[first + j] * vj;
    }
  }
  std::memcpy(acc + d0, &a, sizeof a);
}

CRESCENT_INLINE void mix_lane(std::span<std::byte* const> pages, size_t v_slab,
                              uint32_t block_tokens, uint32_t head_dim, uint32_t n,
                              const float* __restrict p, float* __restrict acc) {
  uint32_t d0 = 0;
  for (; d0 + 8 <= head_dim; d0 += 8)
    mix_lane_dims<float8>(pages, v_slab, block_tokens, head_dim, n, p, d0, acc);
  for (; d0 < head_dim; ++d0)
    mix_lane_dims<float>(pages, v_slab, block_tokens, head_dim, n, p, d0, acc);
}

} // namespace

attention::attention(const page_layout& layout, uint32_t context_tokens_max)
    : layout_(layout), qt_(size_t{layout.head_dim} * lanes_max),
      scores_(size_t{context_tokens_max} * lanes_max), top_(lanes_max), total_(lanes_max),
      acc_(size_t{layout.head_dim} * lanes_max) {}

void attention::add_lane(const float* q, float* out, uint32_t position) {
  q_[count_] = q;
  out_[count_] = out;
  position_[count_] = position;
  ++count_;
}

void attention::run(std::span<std::byte* const> pages, uint32_t layer, uint32_t kv_head) {
  if (count_ == 0)
    return;
  if (count_ < few_lanes && position_[0] == position_[count_ - 1]) {
    for (uint32_t l = 0; l < count_; ++l)
      run_lane(pages, layout_.slab(layer, 0, kv_head), layout_.slab(layer, 1, kv_head), l);
    count_ = 0;
    return;
  }
  transpose_queries();
  score_keys(pages, layout_.slab(layer, 0, kv_head));
  mix_values(pages, layout_.slab(layer, 1, kv_head));
  write_outputs();
  count_ = 0;
}

void attention::transpose_queries() {
  for (uint32_t d = 0; d < layout_.head_dim; ++d)
    for (uint32_t l = 0; l < count_; ++l)
      qt_[size_t{d} * count_ + l] = q_[l][d];
}

const float* attention::kv_vector(std::span<std::byte* const> pages, size_t slab,
                                  uint32_t j) const {
  return floats(pages[j / layout_.block_tokens]) + slab +
         size_t{j % layout_.block_tokens} * layout_.head_dim;
}

CRESCENT_VECTOR_CLONES void attention::score_keys(std::span<std::byte* const> pages,
                                                  size_t k_slab) {
  const uint32_t hd = layout_.head_dim;
  const uint32_t n_keys = position_[count_ - 1] + 1;
  const uint32_t shared = position_[0] + 1; // keys 0..position_[0] are seen by every lane
  std::fill(top_.begin(), top_.end(), -std::numeric_limits<float>::infinity());
  for (uint32_t j = 0; j < shared; ++j) {
    float* s = scores_.data() + size_t{j} * count_;
    score_all_lanes(qt_.data(), count_, hd, kv_vector(pages, k_slab, j), s);
    raise_max(top_.data(), s, count_, 0);
  }
  uint32_t live = 0; // lanes [live, count_) have position >= j and see key j
  for (uint32_t j = shared; j < n_keys; ++j) {
    while (position_[live] < j)
      ++live;
    float* s = scores_.data() + size_t{j} * count_;
    score_live_lanes(qt_.data(), count_, live, hd, kv_vector(pages, k_slab, j), s);
    raise_max(top_.data(), s, count_, live);
  }
}

CRESCENT_VECTOR_CLONES void attention::mix_values(std::span<std::byte* const> pages,
                                                  size_t v_slab) {
  const uint32_t hd = layout_.head_dim;
  const uint32_t n_keys = position_[count_ - 1] + 1;
  const uint32_t shared = position_[0] + 1;
  std::fill(total_.begin(), total_.end(), 0.0f);
  std::fill(acc_.begin(), acc_.end(), 0.0f);
  uint32_t j = 0;
  for (; j + 4 <= shared; j += 4) {
    const float* p[4];
    const float* v[4];
    for (uint32_t m = 0; m < 4; ++m) {
      float* s = scores_.data() + size_t{j + m} * count_;
      weigh(s, top_.data(), total_.data(), count_, 0);
      p[m] = s;
      v[m] = kv_vector(pages, v_slab, j + m);
    }
    mix_four_keys(acc_.data(), count_, hd, p, v);
  }
  uint32_t live = 0;
  for (; j < n_keys; ++j) {
    while (position_[live] < j)
      ++live;
    float* s = scores_.data() + size_t{j} * count_;
    weigh(s, top_.data(), total_.data(), count_, live);
    mix_one_key(acc_.data(), count_, live, hd, s, kv_vector(pages, v_slab, j));
  }
}

// One lane that sees every key (see the file comment for the operations). Scores are kept
// lane-major here, so the exponentials vectorize over keys.
CRESCENT_VECTOR_CLONES void attention::run_lane(std::span<std::byte* const> pages, size_t k_slab,
                                                size_t v_slab, uint32_t l) {
  const uint32_t bt = layout_.block_tokens;
  const uint32_t hd = layout_.head_dim;
  const uint32_t n = position_[l] + 1;
  float* s = scores_.data();
  score_lane(pages, k_slab, bt, hd, n, q_[l], s);
  float top = -std::numeric_limits<float>::infinity();
  for (uint32_t j = 0; j < n; ++j)
    top = top < s[j] ? s[j] : top;
  for (uint32_t j = 0; j < n; ++j)
    s[j] = exp_f(s[j] - top);
  float total = 0.0f;
  for (uint32_t j = 0; j < n; ++j)
    total += s[j];
  float* acc = acc_.data();
  mix_lane(pages, v_slab, bt, hd, n, s, acc);
  for (uint32_t d = 0; d < hd; ++d)
    out_[l][d] = acc[d] / total;
}

void attention::write_outputs() {
  for (uint32_t l = 0; l < count_; ++l)
    for (uint32_t d = 0; d < layout_.head_dim; ++d)
      out_[l][d] = acc_[size_t{d} * count_ + l] / total_[l];
}

} // namespace crescent::gpu::ref
