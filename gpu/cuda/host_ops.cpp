// The host emulation of device_ops: every kernel is a loop over the elements its GPU threads
// would compute, calling the same element functions (model_elements.cuh).
#include "gpu/cuda/device_ops.hpp"

#include "messages/errors.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace crescent::gpu {

namespace {

namespace el = elements;

class host_ops final : public device_ops {
 public:
  std::string describe() const override { return "host emulation"; }

  caf::expected<void*> allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (p == nullptr)
      return make_error(errc::no_space, "host emulation: out of memory");
    return p;
  }

  void release(void* p) noexcept override { std::free(p); }

  caf::error to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return caf::none;
  }

  caf::error to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return caf::none;
  }

  caf::error on_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return caf::none;
  }

  void embed(const float* table, uint32_t d, const device_rows& rows, uint32_t n,
             float* x) override {
    for (uint32_t r = 0; r < n; ++r)
      std::memcpy(x + size_t{r} * d, table + size_t{rows.tokens[r]} * d, d * sizeof(float));
  }

  void rms_norm(const float* x, uint32_t rows, uint32_t dim, const float* weight, float eps,
                float* out) override {
    for (uint32_t r = 0; r < rows; ++r) {
      const float* xr = x + size_t{r} * dim;
      const float inv = el::rms_inverse(xr, dim, eps);
      for (uint32_t i = 0; i < dim; ++i)
        out[size_t{r} * dim + i] = xr[i] * inv * weight[i];
    }
  }

  void matmul(const float* x, uint32_t rows, uint32_t in, const float* w, uint32_t cols,
              float* out) override {
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c)
        out[size_t{r} * cols + c] = el::matmul_element(x, in, w, cols, r, c);
  }

  void add(float* x, const float* y, size_t n) override {
    for (size_t i = 0; i < n; ++i)
      x[i] += y[i];
  }

  void swiglu(const float* gu, uint32_t rows, uint32_t ffn, float* act) override {
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t i = 0; i < ffn; ++i)
        act[size_t{r} * ffn + i] =
            el::swiglu_element(gu[size_t{r} * 2 * ffn + i], gu[size_t{r} * 2 * ffn + ffn + i]);
  }

  void rope_store(float* qkv, const el::attention_shape& s, const device_rows& rows, uint32_t n,
                  const float* cos, const float* sin, float q_scale) override {
    const uint32_t half = s.head_dim / 2;
    const uint32_t kv_dim = s.kv_heads * s.head_dim;
    for (uint32_t r = 0; r < n; ++r) {
      const uint32_t pos = rows.positions[r];
      float* q = qkv + size_t{r} * s.qkv_cols;
      float* k = q + s.d_model;
      const float* v = k + kv_dim;
      const float* c = cos + size_t{pos} * half;
      const float* sn = sin + size_t{pos} * half;
      for (uint32_t h = 0; h < s.heads; ++h)
        for (uint32_t i = 0; i < half; ++i) {
          float& a = q[size_t{h} * s.head_dim + i];
          float& b = q[size_t{h} * s.head_dim + half + i];
          el::rope_pair(a, b, c[i], sn[i]);
          a *= q_scale;
          b *= q_scale;
        }
      auto* page = reinterpret_cast<float*>(rows.pages[rows.page_first[r] + pos / s.block_tokens]);
      const size_t slot = size_t{pos % s.block_tokens} * s.head_dim;
      for (uint32_t g = 0; g < s.kv_heads; ++g) {
        float* kg = k + size_t{g} * s.head_dim;
        for (uint32_t i = 0; i < half; ++i)
          el::rope_pair(kg[i], kg[half + i], c[i], sn[i]);
        std::memcpy(page + el::slab(s, 0, g) + slot, kg, s.head_dim * sizeof(float));
        std::memcpy(page + el::slab(s, 1, g) + slot, v + size_t{g} * s.head_dim,
                    s.head_dim * sizeof(float));
      }
    }
  }

  void attention(const float* qkv, const el::attention_shape& s, const device_rows& rows,
                 uint32_t lane_first, uint32_t lane_count, uint32_t /*keys_max*/, float* scores,
                 size_t scores_stride, float* totals, float* mixed) override {
    const uint32_t group = s.heads / s.kv_heads;
    for (uint32_t i = 0; i < lane_count; ++i) {
      const uint32_t lane = lane_first + i;
      const uint32_t r = lane / s.heads;
      const uint32_t h = lane % s.heads;
      const uint32_t g = h / group;
      const uint32_t n = rows.positions[r] + 1;
      std::byte* const* pages = rows.pages + rows.page_first[r];
      const float* q = qkv + size_t{r} * s.qkv_cols + size_t{h} * s.head_dim;
      float* p = scores + i * scores_stride;
      const size_t k_slab = el::slab(s, 0, g);
      float top = -std::numeric_limits<float>::infinity();
      for (uint32_t j = 0; j < n; ++j) {
        p[j] = el::score_element(q, el::kv_vector(pages, k_slab, s.block_tokens, s.head_dim, j),
                                 s.head_dim);
        top = top < p[j] ? p[j] : top;
      }
      float total = 0.0f;
      for (uint32_t j = 0; j < n; ++j) {
        p[j] = exp_f(p[j] - top);
        total += p[j];
      }
      totals[i] = total;
      const size_t v_slab = el::slab(s, 1, g);
      for (uint32_t d = 0; d < s.head_dim; ++d)
        mixed[size_t{r} * s.d_model + size_t{h} * s.head_dim + d] =
            el::mix_element(pages, v_slab, s.block_tokens, s.head_dim, n, p, total, d);
    }
  }

  void argmax(const float* logits, uint32_t rows, uint32_t vocab, uint32_t* out) override {
    for (uint32_t r = 0; r < rows; ++r) {
      const float* x = logits + size_t{r} * vocab;
      uint32_t best = 0;
      for (uint32_t i = 1; i < vocab; ++i)
        if (el::better(x[i], i, x[best], best))
          best = i;
      out[r] = best;
    }
  }

  caf::error finish() override { return caf::none; }
};

} // namespace

std::unique_ptr<device_ops> make_host_ops() {
  return std::make_unique<host_ops>();
}

} // namespace crescent::gpu
