#include "apps/bench/bench_kv_codec.hpp"

#include "apps/bench/median.hpp"
#include "gpu/block_codec.hpp"
#include "gpu/model_config.hpp"
#include "gpu/reference_model.hpp"
#include "storage/codec/kv_codec.hpp"
#include "storage/codec/kvquant_calibration.hpp"

#include <caf/error.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <span>
#include <vector>

namespace crescent::bench {

namespace {

namespace codec = storage::codec;
using clock_type = std::chrono::steady_clock;

// The speed runs' working set: well past the last-level cache of the machines this runs on.
constexpr size_t speed_set_bytes = size_t{256} << 20;

// The KV pages of one sequence, in the reference engine's layout.
struct sequence {
  std::vector<std::vector<float>> pages;
  std::vector<std::byte*> pointers;

  sequence(const gpu::model_config& m, uint32_t tokens) {
    const size_t count = (tokens + m.block_tokens - 1) / m.block_tokens;
    pages.assign(count, std::vector<float>(m.page_bytes() / sizeof(float), 0.0f));
    refresh();
  }
  sequence(const sequence& other) : pages(other.pages) { refresh(); }
  sequence& operator=(const sequence&) = delete;

  void refresh() {
    pointers.clear();
    for (auto& p : pages)
      pointers.push_back(reinterpret_cast<std::byte*>(p.data()));
  }
};

void prefill(gpu::ref::model& model, sequence& seq, std::span<const uint32_t> tokens) {
  std::vector<gpu::ref::token_row> rows;
  for (size_t first = 0; first < tokens.size(); first += gpu::ref::model::rows_max) {
    rows.clear();
    const size_t end = std::min(tokens.size(), first + gpu::ref::model::rows_max);
    for (size_t i = first; i < end; ++i)
      rows.push_back({seq.pointers, static_cast<uint32_t>(i), tokens[i]});
    model.forward(rows);
  }
}

// What one decode step leaves to compare: the next-token distribution and every layer's
// attention output.
struct step_out {
  uint32_t next = 0;
  std::vector<double> probs;
  std::vector<float> attention; // [layer][d_model]
};

// One decode step of one sequence, a layer at a time so that every layer's attention output
// can be read (the same KV bytes and logits as one forward(): engine.hpp's contract).
void decode_step(gpu::ref::model& model, const gpu::model_config& m, sequence& seq,
                 uint32_t position, uint32_t token, std::vector<float>& stream, step_out& out) {
  const gpu::ref::token_row row{seq.pointers, position, token};
  out.attention.resize(size_t{m.layers} * m.d_model);
  for (uint32_t l = 0; l < m.layers; ++l) {
    model.forward_layers({&row, 1}, l, l + 1, l == 0 ? nullptr : stream.data(), stream.data());
    const auto a = model.attention_output(0);
    std::copy(a.begin(), a.end(), out.attention.begin() + size_t{l} * m.d_model);
  }
  out.next = model.greedy(0);
  const auto logits = model.logits();
  const float top = *std::max_element(logits.begin(), logits.end());
  out.probs.resize(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i)
    total += out.probs[i] = std::exp(static_cast<double>(logits[i]) - top);
  for (auto& p : out.probs)
    p /= total;
}

double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double kl = 0.0;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0.0)
      kl += p[i] * std::log(p[i] / std::max(q[i], 1e-300));
  return std::max(kl, 0.0);
}

double relative_error(const std::vector<float>& ref, const std::vector<float>& x) {
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double{x[i]} - ref[i];
    err += d * d;
    norm += double{ref[i]} * ref[i];
  }
  return norm > 0.0 ? std::sqrt(err / norm) : 0.0;
}

struct prompt_run {
  std::vector<uint32_t> tokens;
  std::unique_ptr<sequence> prefix; // KV of tokens [0, n - 1), full precision
  std::vector<step_out> steps;      // the full-precision decode
  std::vector<uint32_t> decoded;    // its greedy tokens
};

struct codec_row {
  codec::codec_config config;
  size_t encoded_bytes = 0;
  size_t fp16_bytes = 0;
  double full_block_ratio = 0.0;
  uint64_t agree_free = 0, agree_forced = 0, steps = 0;
  double kl_sum = 0.0, attention_sum = 0.0;
  double encode_gbps = 0.0, decode_gbps = 0.0;
};

size_t fp16_bytes_of(const codec::kv_shape& s, uint32_t tokens) {
  return size_t{s.layers} * 2 * s.kv_heads * tokens * s.head_dim * 2;
}

// Encodes and decodes every page of a prefix of `tokens` tokens into `out` (a copy of `in`
// with the decoded pages); false if the codec refused a page.
bool compress_prefix(codec_row& row, const sequence& in, uint32_t tokens, sequence& out) {
  const auto& shape = row.config.shape;
  std::vector<std::byte> bytes(codec::encoded_bytes_max(row.config));
  for (size_t p = 0; p * shape.block_tokens < tokens; ++p) {
    const uint32_t first = static_cast<uint32_t>(p * shape.block_tokens);
    const uint32_t valid = std::min(shape.block_tokens, tokens - first);
    const bool last = first + valid == tokens;
    auto n = codec::encode(row.config, {in.pages[p], valid, first, last}, bytes);
    if (!n) {
      fmt::print(stderr, "{}: encode of page {}: {}\n", codec::to_string(row.config.kind), p,
                 to_string(n.error()));
      return false;
    }
    auto info = codec::decode(row.config, std::span{bytes}.first(*n), out.pages[p]);
    if (!info) {
      fmt::print(stderr, "{}: decode of page {}: {}\n", codec::to_string(row.config.kind), p,
                 to_string(info.error()));
      return false;
    }
    row.encoded_bytes += *n;
    row.fp16_bytes += fp16_bytes_of(shape, valid);
  }
  return true;
}

// Median GB/s of rounds over `pages` (each encoded in full), fp16-equivalent bytes.
template <class F>
double rate(size_t bytes_per_round, double seconds, F&& round) {
  std::vector<double> rates;
  const auto start = clock_type::now();
  while (rates.size() < 3 ||
         std::chrono::duration<double>(clock_type::now() - start).count() < seconds) {
    const auto t0 = clock_type::now();
    round();
    const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    rates.push_back(static_cast<double>(bytes_per_round) / dt / 1e9);
  }
  return median(rates);
}

// A sink for results the optimizer must not drop.
volatile uint64_t sink = 0;

bool measure_speed(codec_row& row, const std::vector<const std::vector<float>*>& pages,
                   double seconds) {
  const auto& shape = row.config.shape;
  const size_t block =
      codec::encoded_bytes(row.config, shape.block_tokens, shape.block_tokens, false);
  std::vector<std::byte> encoded(block * pages.size());
  const size_t bytes = fp16_bytes_of(shape, shape.block_tokens) * pages.size();
  bool ok = true;
  row.encode_gbps = rate(bytes, seconds, [&] {
    for (size_t i = 0; i < pages.size(); ++i) {
      auto n = codec::encode(row.config, {*pages[i], shape.block_tokens, shape.block_tokens, false},
                             std::span{encoded}.subspan(i * block, block));
      ok = ok && n && *n == block;
    }
  });
  std::vector<float> out(shape.page_floats());
  row.decode_gbps = rate(bytes, seconds, [&] {
    for (size_t i = 0; i < pages.size(); ++i) {
      auto info = codec::decode(row.config, std::span{encoded}.subspan(i * block, block), out);
      ok = ok && info;
      sink = sink + std::bit_cast<uint32_t>(out[i % out.size()]);
    }
  });
  return ok;
}

double memcpy_rate(const std::vector<const std::vector<float>*>& pages, size_t fp16_bytes,
                   double seconds) {
  std::vector<std::byte> dst(fp16_bytes * pages.size());
  return rate(dst.size(), seconds, [&] {
    for (size_t i = 0; i < pages.size(); ++i)
      std::memcpy(dst.data() + i * fp16_bytes, pages[i]->data(), fp16_bytes);
    sink = sink + static_cast<uint64_t>(dst[sink % dst.size()]);
  });
}

std::vector<uint32_t> random_prompt(std::mt19937_64& rng, uint32_t tokens, uint32_t vocab) {
  std::vector<uint32_t> out(tokens);
  for (auto& t : out)
    t = static_cast<uint32_t>(rng() % vocab);
  return out;
}

bool options_valid(const bench_kv_codec_options& o) {
  return o.prompts > 0 && o.prompt_tokens_min >= 2 && o.prompt_tokens_max >= o.prompt_tokens_min &&
         o.decode_tokens > 0 && o.calibration_prompts > 0;
}

} // namespace

int bench_kv_codec(const bench_kv_codec_options& o) {
  if (!options_valid(o)) {
    fmt::print(stderr, "crescent bench kv-codec: prompts, calibration prompts and decode tokens "
                       "must be positive, prompt lengths at least 2 and min <= max\n");
    return 2;
  }
  gpu::model_config m;
  m.layers = o.layers;
  m.d_model = o.d_model;
  m.heads = o.heads;
  m.kv_heads = o.kv_heads;
  m.ffn = o.ffn;
  m.vocab = o.vocab;
  m.block_tokens = o.block_tokens;
  m.context_tokens_max = o.prompt_tokens_max + o.decode_tokens;
  m.seed = o.seed;
  const codec::kv_shape shape{m.layers, m.kv_heads, m.head_dim(), m.block_tokens};
  for (auto err : {gpu::validate(m), gpu::check_reference_limits(m),
                   codec::validate({codec::codec_kind::none, shape})})
    if (err) {
      fmt::print(stderr, "crescent bench kv-codec: {}\n", to_string(err));
      return 2;
    }
  std::unique_ptr<gpu::ref::model> model;
  try {
    model = std::make_unique<gpu::ref::model>(m);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "crescent bench kv-codec: not enough memory for the model\n");
    return 2;
  }
  fmt::print("crescent bench kv-codec: reference model {} layers, d_model {}, {} heads, {} kv "
             "heads of {} channels, vocab {}, seed {}; {} prompts of {}..{} tokens, {} decoded "
             "tokens each; blocks of {} tokens\n",
             m.layers, m.d_model, m.heads, m.kv_heads, m.head_dim(), m.vocab, m.seed, o.prompts,
             o.prompt_tokens_min, o.prompt_tokens_max, o.decode_tokens, m.block_tokens);
  const auto t_start = clock_type::now();
  std::vector<float> stream(m.d_model);

  // KVQuant's calibration run: other prompts of the same engine, every page of them (as a
  // cluster with kv_codec kvquant3/4 fits it at bring-up).
  gpu::block_codec_options calibration;
  calibration.sink_tokens = o.sink_tokens;
  calibration.calibration_prompts = o.calibration_prompts;
  calibration.calibration_prompt_tokens = o.prompt_tokens_max;
  calibration.calibration_seed = o.seed;
  const uint32_t bits[] = {3, 4};
  auto fitted = gpu::calibrate_reference(m, bits, calibration);
  if (!fitted) {
    fmt::print(stderr, "crescent bench kv-codec: calibration: {}\n", to_string(fitted.error()));
    return 1;
  }
  const std::shared_ptr<const codec::kvquant_calibration> calibrations[2] = {(*fitted)[0],
                                                                             (*fitted)[1]};
  const double calibration_s = std::chrono::duration<double>(clock_type::now() - t_start).count();

  // The full-precision runs.
  std::mt19937_64 rng{o.seed};
  std::vector<prompt_run> runs(o.prompts);
  // How peaked the full-precision distributions are: a near-tie flips under any perturbation,
  // and a free-running decode diverges for good at its first flip.
  double top1_sum = 0.0, gap_sum = 0.0;
  for (uint32_t i = 0; i < o.prompts; ++i) {
    auto& run = runs[i];
    const uint32_t span = o.prompt_tokens_max - o.prompt_tokens_min;
    const uint32_t n = o.prompt_tokens_min + (o.prompts > 1 ? span * i / (o.prompts - 1) : span);
    run.tokens = random_prompt(rng, n, m.vocab);
    sequence seq(m, n + o.decode_tokens);
    prefill(*model, seq, std::span{run.tokens}.first(n - 1));
    run.prefix = std::make_unique<sequence>(seq);
    uint32_t token = run.tokens.back();
    run.steps.resize(o.decode_tokens);
    for (uint32_t s = 0; s < o.decode_tokens; ++s) {
      decode_step(*model, m, seq, n - 1 + s, token, stream, run.steps[s]);
      token = run.steps[s].next;
      run.decoded.push_back(token);
      auto probs = run.steps[s].probs;
      std::partial_sort(probs.begin(), probs.begin() + 2, probs.end(), std::greater<>{});
      top1_sum += probs[0];
      gap_sum += probs[0] - probs[1];
    }
  }

  std::vector<codec_row> rows;
  for (uint8_t k = 0; k < codec::codec_kind_count; ++k) {
    codec_row row;
    row.config.kind = static_cast<codec::codec_kind>(k);
    row.config.shape = shape;
    row.config.group_tokens = o.group_tokens;
    if (row.config.kind == codec::codec_kind::kvquant3)
      row.config.calibration = calibrations[0];
    if (row.config.kind == codec::codec_kind::kvquant4)
      row.config.calibration = calibrations[1];
    if (auto err = codec::validate(row.config)) {
      fmt::print(stderr, "crescent bench kv-codec: {}\n", to_string(err));
      return 2;
    }
    row.full_block_ratio = static_cast<double>(fp16_bytes_of(shape, m.block_tokens)) /
                           static_cast<double>(codec::encoded_bytes(row.config, m.block_tokens,
                                                                    m.block_tokens, false));
    rows.push_back(std::move(row));
  }

  step_out out;
  for (auto& row : rows) {
    for (auto& run : runs) {
      const uint32_t n = static_cast<uint32_t>(run.tokens.size());
      sequence decoded(*run.prefix);
      if (!compress_prefix(row, *run.prefix, n - 1, decoded))
        return 1;
      // Teacher-forced: fed the full-precision tokens, compared step by step.
      sequence forced(decoded);
      for (uint32_t s = 0; s < o.decode_tokens; ++s) {
        const uint32_t token = s == 0 ? run.tokens.back() : run.decoded[s - 1];
        decode_step(*model, m, forced, n - 1 + s, token, stream, out);
        row.agree_forced += out.next == run.decoded[s];
        row.kl_sum += kl_divergence(run.steps[s].probs, out.probs);
        row.attention_sum += relative_error(run.steps[s].attention, out.attention);
        ++row.steps;
      }
      // Free-running: the codec's own greedy tokens.
      uint32_t token = run.tokens.back();
      for (uint32_t s = 0; s < o.decode_tokens; ++s) {
        decode_step(*model, m, decoded, n - 1 + s, token, stream, out);
        token = out.next;
        row.agree_free += token == run.decoded[s];
      }
    }
  }
  const double quality_s =
      std::chrono::duration<double>(clock_type::now() - t_start).count() - calibration_s;

  // Speed: the prompt set's full blocks past the first (no sinks), on this thread, copied
  // round-robin into a working set of at least speed_set_bytes so that the rates are of
  // memory, not of a cache that a pool's blocks would never sit in.
  std::vector<const std::vector<float>*> sources;
  for (auto& run : runs)
    for (size_t p = 1; (p + 1) * m.block_tokens <= run.tokens.size() - 1; ++p)
      sources.push_back(&run.prefix->pages[p]);
  if (sources.empty()) {
    fmt::print(stderr, "crescent bench kv-codec: no full block past the first to time: "
                       "longer prompts are needed\n");
    return 2;
  }
  std::vector<std::vector<float>> speed_set;
  for (size_t i = 0; i < sources.size() || speed_set.size() * m.page_bytes() < speed_set_bytes; ++i)
    speed_set.push_back(*sources[i % sources.size()]);
  std::vector<const std::vector<float>*> full_pages;
  for (const auto& page : speed_set)
    full_pages.push_back(&page);
  const double memcpy_gbps =
      memcpy_rate(full_pages, fp16_bytes_of(shape, m.block_tokens), o.speed_seconds);
  for (auto& row : rows)
    if (!measure_speed(row, full_pages, o.speed_seconds)) {
      fmt::print(stderr, "{}: a timed encode or decode failed\n",
                 codec::to_string(row.config.kind));
      return 1;
    }

  fmt::print("calibration {:.1f} s, quality runs {:.1f} s; speed over {} copies of {} full "
             "blocks of {} KiB fp16-equivalent, one thread; memcpy of the same bytes {:.2f} "
             "GB/s\n",
             calibration_s, quality_s, full_pages.size(), sources.size(),
             fp16_bytes_of(shape, m.block_tokens) / 1024, memcpy_gbps);
  const double ref_steps = static_cast<double>(o.prompts) * o.decode_tokens;
  fmt::print("full-precision next-token distributions: mean top-1 probability {:.4f}, mean "
             "top-1 minus top-2 probability {:.4f} (uniform: {:.5f})\n\n",
             top1_sum / ref_steps, gap_sum / ref_steps, 1.0 / m.vocab);
  fmt::print("| codec | ratio vs fp16 (prompts) | ratio (full block) | greedy agreement | "
             "top-1 agreement (forced) | mean KL | attention rel. error | encode GB/s | "
             "decode GB/s |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& row : rows) {
    const double steps = static_cast<double>(row.steps);
    fmt::print("| {} | {:.3f}x | {:.3f}x | {:.2f}% | {:.2f}% | {:.3g} | {:.3g} | {:.2f} | "
               "{:.2f} |\n",
               codec::to_string(row.config.kind),
               static_cast<double>(row.fp16_bytes) / static_cast<double>(row.encoded_bytes),
               row.full_block_ratio, 100.0 * static_cast<double>(row.agree_free) / steps,
               100.0 * static_cast<double>(row.agree_forced) / steps, row.kl_sum / steps,
               row.attention_sum / steps, row.encode_gbps, row.decode_gbps);
  }
  return 0;
}

} // namespace crescent::bench
