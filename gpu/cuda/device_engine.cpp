// The device engine (device_engine.hpp): argument checks, device memory, and the forward pass
// as a sequence of device_ops kernels. The order of the sublayers and what each reads and
// writes follow ref::model (reference_model.cpp) step for step.
#include "gpu/cuda/device_engine.hpp"

#include "gpu/reference_model.hpp"
#include "gpu/sequence_checks.hpp"
#include "messages/errors.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace crescent::gpu {

namespace {

using std::to_string;

// Device memory of the engine's own, released with it.
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(device_ops* ops, void* p) : ops_(ops), p_(p) {}
  device_buffer(device_buffer&& other) noexcept
      : ops_(std::exchange(other.ops_, nullptr)), p_(std::exchange(other.p_, nullptr)) {}
  device_buffer& operator=(device_buffer&&) = delete;
  ~device_buffer() {
    if (p_ != nullptr)
      ops_->release(p_);
  }

 private:
  device_ops* ops_ = nullptr;
  void* p_ = nullptr;
};

struct device_layer {
  const float* attn_norm = nullptr;
  const float* wqkv = nullptr;
  const float* wo = nullptr;
  const float* ffn_norm = nullptr;
  const float* wgu = nullptr;
  const float* wdown = nullptr;
};

class device_engine final : public engine {
 public:
  // Rows computed together, as ref::model::rows_max: longer chunks and batches go in groups.
  static constexpr uint32_t rows_max = 64;

  device_engine(const model_config& cfg, engine_options options, std::unique_ptr<device_ops> ops,
                uint64_t scores_bytes_max)
      : cfg_(cfg), options_(std::move(options)), ops_(std::move(ops)),
        qkv_cols_(cfg.d_model + 2 * cfg.kv_dim()),
        pages_per_sequence_max_((cfg.context_tokens_max + cfg.block_tokens - 1) / cfg.block_tokens),
        lanes_per_pass_(static_cast<uint32_t>(std::clamp<uint64_t>(
            scores_bytes_max / (uint64_t{cfg.context_tokens_max} * sizeof(float)), 1,
            uint64_t{rows_max} * cfg.heads))) {}

  caf::error init();

  const model_config& config() const override { return cfg_; }

  size_t stream_bytes(uint32_t tokens) const override {
    return size_t{tokens} * cfg_.d_model * sizeof(float);
  }

  caf::expected<prefill_result> prefill(const sequence_ref& seq,
                                        std::span<const uint32_t> tokens) override {
    return run_prefill(seq, tokens, {0, cfg_.layers}, {});
  }

  caf::expected<prefill_result> prefill_layers(const sequence_ref& seq,
                                               std::span<const uint32_t> tokens, layer_range r,
                                               std::span<std::byte> stream) override {
    if (auto err = check_layers(cfg_, r, stream, stream_bytes(tokens.size()), alignof(float)))
      return err;
    return run_prefill(seq, tokens, r, stream);
  }

  caf::expected<decode_result> decode(std::span<const sequence_ref> seqs,
                                      std::span<const uint32_t> tokens) override;

 private:
  // Device memory the engine keeps until it is destroyed.
  caf::expected<void*> own(uint64_t bytes);
  caf::expected<const float*> upload(const std::vector<float>& v);
  caf::error upload_weights(const ref::weights& w);

  caf::expected<prefill_result> run_prefill(const sequence_ref& seq,
                                            std::span<const uint32_t> tokens, layer_range r,
                                            std::span<std::byte> stream);
  // The group being set up: a sequence's pages into its page table (their first index), and a
  // row (a token at a position of the sequence whose pages start at page_first).
  uint32_t add_pages(const sequence_ref& seq);
  void add_row(uint32_t page_first, uint32_t position, uint32_t token);
  // Copies the group's rows and page table to the device.
  caf::error send_rows();
  // Layers r of the group's rows; the residual stream from `stream_in` when r.first > 0, and
  // into `stream_out` when not null.
  caf::error forward(layer_range r, const float* stream_in, float* stream_out);
  void self_attention(const device_layer& w, uint32_t layer);
  void feed_forward(const device_layer& w);
  // Greedy tokens of the group's rows [first, first + count), onto `out`.
  caf::error greedy(uint32_t first, uint32_t count, std::vector<uint32_t>& out);

  model_config cfg_;
  engine_options options_;
  std::unique_ptr<device_ops> ops_;
  uint32_t qkv_cols_;
  uint32_t pages_per_sequence_max_;
  uint32_t lanes_per_pass_;

  // Everything below points into it; declared after ops_, so released before the device goes.
  std::vector<device_buffer> memory_;
  const float* embedding_ = nullptr;
  std::vector<device_layer> layers_;
  const float* final_norm_ = nullptr;
  const float* lm_head_ = nullptr;
  const float* rope_cos_ = nullptr;
  const float* rope_sin_ = nullptr;
  float *x_ = nullptr, *h_ = nullptr, *qkv_ = nullptr, *mixed_ = nullptr, *proj_ = nullptr;
  float *gu_ = nullptr, *act_ = nullptr, *logits_ = nullptr, *scores_ = nullptr, *totals_ = nullptr;
  uint32_t* chosen_ = nullptr;    // greedy tokens [rows_max]
  uint32_t* row_words_ = nullptr; // tokens | positions | page_first, rows_max each
  std::byte** page_table_ = nullptr;
  device_rows rows_{};

  // The group being set up on the host.
  std::vector<uint32_t> host_words_; // tokens | positions | page_first
  std::vector<std::byte*> host_pages_;
  uint32_t n_ = 0; // rows in the group
};

caf::expected<void*> device_engine::own(uint64_t bytes) {
  auto p = ops_->allocate(bytes);
  if (!p)
    return p.error();
  memory_.emplace_back(ops_.get(), *p);
  return *p;
}

caf::expected<const float*> device_engine::upload(const std::vector<float>& v) {
  auto p = own(v.size() * sizeof(float));
  if (!p)
    return p.error();
  if (auto err = ops_->to_device(*p, v.data(), v.size() * sizeof(float)))
    return err;
  return static_cast<const float*>(*p);
}

caf::error device_engine::upload_weights(const ref::weights& w) {
  auto put = [this](const std::vector<float>& v, const float*& to) -> caf::error {
    auto p = upload(v);
    if (!p)
      return p.error();
    to = *p;
    return caf::none;
  };
  if (auto err = put(w.embedding, embedding_))
    return err;
  if (auto err = put(w.final_norm, final_norm_))
    return err;
  if (auto err = put(w.lm_head, lm_head_))
    return err;
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const auto& src = w.layers[l];
    auto& dst = layers_[l];
    for (auto [v, to] : {std::pair{&src.attn_norm, &dst.attn_norm},
                         {&src.wqkv, &dst.wqkv},
                         {&src.wo, &dst.wo},
                         {&src.ffn_norm, &dst.ffn_norm},
                         {&src.wgu, &dst.wgu},
                         {&src.wdown, &dst.wdown}})
      if (auto err = put(*v, *to))
        return err;
  }
  return caf::none;
}

caf::error device_engine::init() {
  const uint64_t d = cfg_.d_model;
  const uint64_t f = cfg_.ffn;
  const uint64_t half = cfg_.head_dim() / 2;
  const uint64_t rows = rows_max;
  const uint64_t scratch_floats = rows * (4 * d + qkv_cols_ + 3 * f + cfg_.vocab) +
                                  uint64_t{lanes_per_pass_} * (cfg_.context_tokens_max + 1);
  const uint64_t weight_floats =
      uint64_t{cfg_.vocab} * d * 2 + d +
      uint64_t{cfg_.layers} * (2 * d + d * qkv_cols_ + d * d + 3 * d * f) +
      2 * uint64_t{cfg_.context_tokens_max} * half;
  const uint64_t table_bytes = rows * pages_per_sequence_max_ * sizeof(std::byte*);
  const uint64_t need = (scratch_floats + weight_floats) * sizeof(float) + table_bytes;
  if (need > device_engine_memory_max)
    return make_error(errc::limit_exceeded,
                      "device engine: this model needs " + to_string(need >> 20) +
                          " MiB of device memory besides its pages, above the engine's " +
                          to_string(device_engine_memory_max >> 20) + " MiB");
  try {
    if (auto err = upload_weights(ref::draw_weights(cfg_)))
      return err;
    const auto rope = ref::rope_for(cfg_);
    auto c = upload(rope->cos);
    auto s = c ? upload(rope->sin) : c;
    if (!s)
      return s.error();
    rope_cos_ = *c;
    rope_sin_ = *s;
  } catch (const std::bad_alloc&) {
    return make_error(errc::no_space, "device engine: not enough host memory to draw the weights");
  }
  auto scratch = [this](uint64_t floats, float*& to) -> caf::error {
    auto p = own(floats * sizeof(float));
    if (!p)
      return p.error();
    to = static_cast<float*>(*p);
    return caf::none;
  };
  for (auto [floats, to] : {std::pair{rows * d, &x_},
                            {rows * d, &h_},
                            {rows * qkv_cols_, &qkv_},
                            {rows * d, &mixed_},
                            {rows * d, &proj_},
                            {rows * 2 * f, &gu_},
                            {rows * f, &act_},
                            {rows * cfg_.vocab, &logits_},
                            {uint64_t{lanes_per_pass_} * cfg_.context_tokens_max, &scores_},
                            {uint64_t{lanes_per_pass_}, &totals_}})
    if (auto err = scratch(floats, *to))
      return err;
  auto words = own(4 * rows * sizeof(uint32_t));
  auto table = words ? own(table_bytes) : words;
  if (!table)
    return table.error();
  row_words_ = static_cast<uint32_t*>(*words);
  chosen_ = row_words_ + 3 * rows;
  page_table_ = static_cast<std::byte**>(*table);
  rows_ = {row_words_, row_words_ + rows, row_words_ + 2 * rows, page_table_};
  host_words_.resize(3 * rows);
  host_pages_.reserve(rows * pages_per_sequence_max_);
  return caf::none;
}

uint32_t device_engine::add_pages(const sequence_ref& seq) {
  const auto first = static_cast<uint32_t>(host_pages_.size());
  const size_t used = std::min<size_t>(seq.pages.size(), pages_per_sequence_max_);
  // The device table holds rows_max sequences of the longest context (init).
  assert(host_pages_.size() + used <= size_t{rows_max} * pages_per_sequence_max_);
  host_pages_.insert(host_pages_.end(), seq.pages.begin(), seq.pages.begin() + used);
  return first;
}

void device_engine::add_row(uint32_t page_first, uint32_t position, uint32_t token) {
  assert(n_ < rows_max && page_first < host_pages_.size());
  host_words_[n_] = token;
  host_words_[rows_max + n_] = position;
  host_words_[2 * rows_max + n_] = page_first;
  ++n_;
}

caf::error device_engine::send_rows() {
  if (auto err = ops_->to_device(row_words_, host_words_.data(), 3 * rows_max * sizeof(uint32_t)))
    return err;
  return ops_->to_device(page_table_, host_pages_.data(), host_pages_.size() * sizeof(std::byte*));
}

void device_engine::self_attention(const device_layer& w, uint32_t layer) {
  const uint32_t d = cfg_.d_model;
  const uint32_t hd = cfg_.head_dim();
  const elements::attention_shape shape{cfg_.heads, cfg_.kv_heads, hd, cfg_.block_tokens, qkv_cols_,
                                        d,          layer};
  ops_->rms_norm(x_, n_, d, w.attn_norm, cfg_.norm_eps, h_);
  ops_->matmul(h_, n_, d, w.wqkv, qkv_cols_, qkv_);
  ops_->rope_store(qkv_, shape, rows_, n_, rope_cos_, rope_sin_,
                   1.0f / std::sqrt(static_cast<float>(hd)));
  uint32_t keys_max = 0;
  for (uint32_t r = 0; r < n_; ++r)
    keys_max = std::max(keys_max, host_words_[rows_max + r] + 1);
  const uint32_t lanes = n_ * cfg_.heads;
  for (uint32_t first = 0; first < lanes; first += lanes_per_pass_)
    ops_->attention(qkv_, shape, rows_, first, std::min(lanes_per_pass_, lanes - first), keys_max,
                    scores_, cfg_.context_tokens_max, totals_, mixed_);
  ops_->matmul(mixed_, n_, d, w.wo, d, proj_);
  ops_->add(x_, proj_, size_t{n_} * d);
}

void device_engine::feed_forward(const device_layer& w) {
  const uint32_t d = cfg_.d_model;
  const uint32_t f = cfg_.ffn;
  ops_->rms_norm(x_, n_, d, w.ffn_norm, cfg_.norm_eps, h_);
  ops_->matmul(h_, n_, d, w.wgu, 2 * f, gu_);
  ops_->swiglu(gu_, n_, f, act_);
  ops_->matmul(act_, n_, f, w.wdown, d, proj_);
  ops_->add(x_, proj_, size_t{n_} * d);
}

caf::error device_engine::forward(layer_range r, const float* stream_in, float* stream_out) {
  if (auto err = send_rows())
    return err;
  const size_t bytes = size_t{n_} * cfg_.d_model * sizeof(float);
  if (r.first == 0) {
    ops_->embed(embedding_, cfg_.d_model, rows_, n_, x_);
  } else if (auto err = ops_->to_device(x_, stream_in, bytes)) {
    return err;
  }
  for (uint32_t l = r.first; l < r.end; ++l) {
    self_attention(layers_[l], l);
    feed_forward(layers_[l]);
  }
  if (stream_out != nullptr)
    if (auto err = ops_->to_host(stream_out, x_, bytes))
      return err;
  return ops_->finish();
}

caf::error device_engine::greedy(uint32_t first, uint32_t count, std::vector<uint32_t>& out) {
  const uint32_t d = cfg_.d_model;
  ops_->rms_norm(x_ + size_t{first} * d, count, d, final_norm_, cfg_.norm_eps, h_);
  ops_->matmul(h_, count, d, lm_head_, cfg_.vocab, logits_);
  ops_->argmax(logits_, count, cfg_.vocab, chosen_);
  const size_t at = out.size();
  out.resize(at + count);
  if (auto err = ops_->to_host(out.data() + at, chosen_, count * sizeof(uint32_t)))
    return err;
  return ops_->finish();
}

caf::expected<prefill_result> device_engine::run_prefill(const sequence_ref& seq,
                                                         std::span<const uint32_t> tokens,
                                                         layer_range r,
                                                         std::span<std::byte> stream) {
  const auto start = std::chrono::steady_clock::now();
  if (auto err = check_sequence(cfg_, seq, tokens, prefill_call, alignof(float)))
    return err;
  auto* floats = reinterpret_cast<float*>(stream.data());
  for (size_t first = 0; first < tokens.size(); first += rows_max) {
    const size_t n = std::min<size_t>(rows_max, tokens.size() - first);
    n_ = 0;
    host_pages_.clear();
    const uint32_t pages = add_pages(seq); // every row of a chunk reads the same pages
    for (size_t i = 0; i < n; ++i)
      add_row(pages, static_cast<uint32_t>(seq.length_tokens + first + i), tokens[first + i]);
    float* group = stream.empty() ? nullptr : floats + first * cfg_.d_model;
    if (auto err =
            forward(r, r.first == 0 ? nullptr : group, r.end == cfg_.layers ? nullptr : group))
      return err;
  }
  prefill_result result;
  if (r.end == cfg_.layers) {
    std::vector<uint32_t> chosen;
    if (auto err = greedy(n_ - 1, 1, chosen))
      return err;
    result.next_token = chosen[0];
  }
  result.compute_ns =
      call_cost_ns(options_, start, layer_flops(cfg_, seq.length_tokens, tokens.size(), r));
  return result;
}

caf::expected<decode_result> device_engine::decode(std::span<const sequence_ref> seqs,
                                                   std::span<const uint32_t> tokens) {
  const auto start = std::chrono::steady_clock::now();
  auto flops = check_decode(cfg_, seqs, tokens, alignof(float));
  if (!flops)
    return flops.error();
  decode_result result;
  result.next_tokens.reserve(seqs.size());
  for (size_t first = 0; first < seqs.size(); first += rows_max) {
    const size_t n = std::min<size_t>(rows_max, seqs.size() - first);
    n_ = 0;
    host_pages_.clear();
    for (size_t i = 0; i < n; ++i)
      add_row(add_pages(seqs[first + i]), seqs[first + i].length_tokens, tokens[first + i]);
    if (auto err = forward({0, cfg_.layers}, nullptr, nullptr))
      return err;
    if (auto err = greedy(0, n_, result.next_tokens))
      return err;
  }
  result.compute_ns = call_cost_ns(options_, start, *flops);
  return result;
}

} // namespace

caf::expected<std::unique_ptr<engine>> make_device_engine(const model_config& cfg,
                                                          engine_options options,
                                                          std::unique_ptr<device_ops> ops,
                                                          uint64_t scores_bytes_max) {
  if (ops == nullptr)
    return make_error(errc::invalid_argument, "device engine: no device");
  if (scores_bytes_max == 0 || scores_bytes_max > device_engine_scores_bytes_max)
    return make_error(errc::invalid_argument, "device engine: scores scratch must be 1 to " +
                                                  to_string(device_engine_scores_bytes_max) +
                                                  " bytes");
  if (auto err = validate(cfg))
    return err;
  if (auto err = check_reference_limits(cfg))
    return err;
  if (cfg.kv_element_bytes != sizeof(float))
    return make_error(errc::bad_config, "device engine: model.kv_element_bytes must be 4 (it "
                                        "computes float32 KV, as the reference engine)");
  if (auto err = check_timing(options))
    return err;
  auto eng =
      std::make_unique<device_engine>(cfg, std::move(options), std::move(ops), scores_bytes_max);
  if (auto err = eng->init())
    return err;
  return std::unique_ptr<engine>{std::move(eng)};
}

caf::expected<std::unique_ptr<engine>> make_cuda_engine(const model_config& cfg,
                                                        engine_options options, int device) {
  auto ops = make_cuda_ops(device);
  if (!ops)
    return ops.error();
  return make_device_engine(cfg, std::move(options), std::move(*ops));
}

} // namespace crescent::gpu
