#include "apps/bench/bench_gpu.hpp"

#include "apps/bench/median.hpp"
#include "gpu/cuda/device_engine.hpp"
#include "gpu/cuda/device_ops.hpp"
#include "gpu/engine.hpp"
#include "gpu/model_config.hpp"
#include "messages/errors.hpp"

#ifdef CRESCENT_HAVE_CUDA
#include "gpu/cuda/kv_pages.hpp"
#endif

#include <fmt/core.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace crescent::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// The pages of every sequence of a run, in one allocation of host or device memory.
struct kv_arena {
  gpu::device_ops* ops = nullptr; // null: host memory
  std::vector<std::byte> host;
  void* device = nullptr;
  size_t bytes = 0;
  std::vector<std::vector<std::byte*>> pages; // per sequence

  kv_arena() = default;
  kv_arena(const kv_arena&) = delete;
  kv_arena& operator=(const kv_arena&) = delete;
  ~kv_arena() {
    if (ops != nullptr && device != nullptr)
      ops->release(device);
  }

  // `sequences` sequences of `per_sequence` pages each; zeroed.
  caf::error make(gpu::device_ops* on, size_t sequences, size_t per_sequence, size_t page_bytes) {
    ops = on;
    bytes = sequences * per_sequence * page_bytes;
    std::byte* base = nullptr;
    host.assign(bytes, std::byte{0});
    if (ops == nullptr) {
      base = host.data();
    } else {
      auto p = ops->allocate(bytes);
      if (!p)
        return p.error();
      device = *p;
      if (auto err = ops->to_device(device, host.data(), bytes))
        return err;
      base = static_cast<std::byte*>(device);
    }
    pages.assign(sequences, {});
    for (size_t s = 0; s < sequences; ++s)
      for (size_t p = 0; p < per_sequence; ++p)
        pages[s].push_back(base + (s * per_sequence + p) * page_bytes);
    return caf::none;
  }

  // The bytes as the host sees them (copied back from the device).
  caf::expected<std::vector<std::byte>> read() {
    if (ops == nullptr)
      return host;
    std::vector<std::byte> out(bytes);
    if (auto err = ops->to_host(out.data(), device, bytes))
      return err;
    return out;
  }
};

struct serve_result {
  double prefill_s = 0.0;
  double decode_s = 0.0;
  std::vector<uint32_t> tokens; // every greedy token, in order
};

std::vector<uint32_t> make_prompt(uint32_t n, uint32_t vocab, uint64_t salt) {
  std::vector<uint32_t> out(n);
  uint64_t s = 0x2545f4914f6cdd1dull ^ salt;
  for (auto& t : out) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<uint32_t>((s >> 33) % vocab);
  }
  return out;
}

caf::expected<serve_result> serve(gpu::engine& eng, kv_arena& kv, const bench_gpu_options& o) {
  serve_result out;
  std::vector<uint32_t> next;
  for (uint32_t i = 0; i < o.prompts; ++i) {
    const auto prompt = make_prompt(o.prompt_tokens, o.vocab, o.seed * 1000 + i);
    uint32_t token = 0;
    for (uint32_t first = 0; first < o.prompt_tokens; first += o.chunk_tokens) {
      const uint32_t n = std::min(o.chunk_tokens, o.prompt_tokens - first);
      const auto start = clock_type::now();
      auto res = eng.prefill({kv.pages[i], first}, std::span{prompt}.subspan(first, n));
      out.prefill_s += seconds_since(start);
      if (!res)
        return res.error();
      token = res->next_token;
    }
    out.tokens.push_back(token);
    next.push_back(token);
  }
  for (uint32_t step = 0; step < o.decode_steps; ++step) {
    std::vector<gpu::sequence_ref> seqs;
    for (uint32_t i = 0; i < o.prompts; ++i)
      seqs.push_back({kv.pages[i], o.prompt_tokens + step});
    const auto start = clock_type::now();
    auto res = eng.decode(seqs, next);
    out.decode_s += seconds_since(start);
    if (!res)
      return res.error();
    next = res->next_tokens;
    out.tokens.insert(out.tokens.end(), next.begin(), next.end());
  }
  return out;
}

// Where the device engine first parts from the reference, so that one run on a device names the
// kernel to look at: a token (its prompt, and whether prefill or which decode step chose it)...
void print_first_token_difference(const std::vector<uint32_t>& ref,
                                  const std::vector<uint32_t>& dev, const bench_gpu_options& o) {
  size_t i = 0;
  while (i < ref.size() && i < dev.size() && ref[i] == dev[i])
    ++i;
  if (i == ref.size() || i == dev.size())
    return;
  const size_t prompt = i % o.prompts;
  const std::string when =
      i < o.prompts ? "prefill's token" : fmt::format("decode step {}", i / o.prompts - 1);
  fmt::print("first token difference: prompt {}, {}: reference {}, device {}\n", prompt, when,
             ref[i], dev[i]);
}

// ...and a KV float, by its place in the page layout ([layer][K|V][kv_head][token][head_dim]).
void print_first_kv_difference(const gpu::model_config& cfg, size_t pages_per_sequence,
                               const std::vector<std::byte>& ref,
                               const std::vector<std::byte>& dev) {
  const size_t n = std::min(ref.size(), dev.size()) / sizeof(float);
  for (size_t f = 0; f < n; ++f) {
    float r = 0.0f, d = 0.0f;
    std::memcpy(&r, ref.data() + f * sizeof(float), sizeof r);
    std::memcpy(&d, dev.data() + f * sizeof(float), sizeof d);
    if (std::memcmp(&r, &d, sizeof r) == 0)
      continue;
    const size_t page_floats = cfg.page_bytes() / sizeof(float);
    const size_t page = f / page_floats;
    size_t at = f % page_floats;
    const size_t hd = cfg.head_dim();
    const size_t dim = at % hd;
    at /= hd;
    const size_t token = at % cfg.block_tokens;
    at /= cfg.block_tokens;
    const size_t kv_head = at % cfg.kv_heads;
    at /= cfg.kv_heads;
    const size_t kind = at % 2;
    const size_t layer = at / 2;
    fmt::print("first KV difference: prompt {}, token {}, layer {}, {}, kv head {}, dim {}: "
               "reference {:.9g}, device {:.9g}\n",
               page / pages_per_sequence, (page % pages_per_sequence) * cfg.block_tokens + token,
               layer, kind == 0 ? "K" : "V", kv_head, dim, r, d);
    return;
  }
}

caf::error check_options(const bench_gpu_options& o) {
  auto bad = [](const char* what) { return make_error(errc::invalid_argument, what); };
  if (o.prompts == 0 || o.prompts > 256)
    return bad("--prompts must be 1 to 256");
  if (o.prompt_tokens == 0 || o.chunk_tokens == 0 || o.chunk_tokens > o.prompt_tokens)
    return bad("--prompt-tokens and --chunk-tokens must be positive, the chunk no longer than "
               "the prompt");
  if (uint64_t{o.prompt_tokens} + o.decode_steps > gpu::reference_context_tokens_max)
    return bad("--prompt-tokens plus --decode-steps must be at most 131072");
  if (o.pages == 0 || o.pages > 65535 || o.rounds == 0 || o.rounds > 1000)
    return bad("--pages must be 1 to 65535 and --rounds 1 to 1000");
  return caf::none;
}

gpu::model_config model_of(const bench_gpu_options& o) {
  gpu::model_config cfg;
  cfg.layers = o.layers;
  cfg.d_model = o.d_model;
  cfg.heads = o.heads;
  cfg.kv_heads = o.kv_heads;
  cfg.ffn = o.ffn;
  cfg.vocab = o.vocab;
  cfg.block_tokens = o.block_tokens;
  cfg.context_tokens_max = o.prompt_tokens + o.decode_steps;
  cfg.seed = o.seed;
  return cfg;
}

// The engine part: the device engine on `ops` against the reference, its pages allocated from
// `memory` (null: host memory, for the host emulation); 0, or 1 on a difference or a failed
// call.
int compare_engines(const gpu::model_config& cfg, const bench_gpu_options& o,
                    std::unique_ptr<gpu::device_ops> ops, gpu::device_ops* memory) {
  const std::string device = ops->describe();
  auto ref = gpu::make_reference_engine(cfg);
  auto dev = gpu::make_device_engine(cfg, {}, std::move(ops));
  if (!ref || !dev) {
    fmt::print(stderr, "bench gpu: {}\n", describe(!ref ? ref.error() : dev.error()));
    return 1;
  }
  const size_t per_sequence = (cfg.context_tokens_max + cfg.block_tokens - 1) / cfg.block_tokens;
  kv_arena ref_kv, dev_kv, again_kv;
  auto err = ref_kv.make(nullptr, o.prompts, per_sequence, cfg.page_bytes());
  if (!err)
    err = dev_kv.make(memory, o.prompts, per_sequence, cfg.page_bytes());
  if (!err)
    err = again_kv.make(memory, o.prompts, per_sequence, cfg.page_bytes());
  if (err) {
    fmt::print(stderr, "bench gpu: {}\n", describe(err));
    return 1;
  }
  // The device twice: the second run shows that it computes the same bytes run to run.
  auto a = serve(**ref, ref_kv, o);
  auto b = serve(**dev, dev_kv, o);
  auto again = serve(**dev, again_kv, o);
  auto dev_bytes = dev_kv.read();
  auto again_bytes = again_kv.read();
  for (const caf::error* e :
       {a ? nullptr : &a.error(), b ? nullptr : &b.error(), again ? nullptr : &again.error(),
        dev_bytes ? nullptr : &dev_bytes.error(), again_bytes ? nullptr : &again_bytes.error()})
    if (e != nullptr) {
      fmt::print(stderr, "bench gpu: {}\n", describe(*e));
      return 1;
    }
  const double prefill_tokens = static_cast<double>(o.prompts) * o.prompt_tokens;
  const double decode_tokens = static_cast<double>(o.prompts) * o.decode_steps;
  fmt::print("engine: {} against the CPU reference (one core)\n", device);
  fmt::print("{:<22}{:>14}{:>14}{:>10}\n", "tokens/s", "device", "reference", "ratio");
  auto row = [](const char* what, double tokens, double dev_s, double ref_s) {
    if (tokens == 0)
      return;
    fmt::print("{:<22}{:>14.0f}{:>14.0f}{:>9.2f}x\n", what, tokens / dev_s, tokens / ref_s,
               ref_s / dev_s);
  };
  row("prefill", prefill_tokens, b->prefill_s, a->prefill_s);
  row("decode", decode_tokens, b->decode_s, a->decode_s);
  const bool same_tokens = a->tokens == b->tokens;
  const bool same_kv = *dev_bytes == ref_kv.host;
  const bool repeatable = again->tokens == b->tokens && *again_bytes == *dev_bytes;
  fmt::print("greedy tokens equal: {} ({} tokens); KV bytes equal: {} ({} MiB)\n",
             same_tokens ? "yes" : "NO", a->tokens.size(), same_kv ? "yes" : "NO",
             ref_kv.bytes >> 20);
  if (!same_tokens)
    print_first_token_difference(a->tokens, b->tokens, o);
  if (!same_kv)
    print_first_kv_difference(cfg, per_sequence, ref_kv.host, *dev_bytes);
  fmt::print("device run to run: tokens and KV bytes equal: {}\n", repeatable ? "yes" : "NO");
  return same_tokens && same_kv && repeatable ? 0 : 1;
}

#ifdef CRESCENT_HAVE_CUDA

// Gathers and scatters of scattered pages against one copy of as many bytes within the device.
int compare_pages(const gpu::model_config& cfg, const bench_gpu_options& o, gpu::device_ops& ops) {
  const size_t page_bytes = cfg.page_bytes();
  const size_t bytes = size_t{o.pages} * page_bytes;
  std::vector<void*> owned;
  auto release = [&] {
    for (void* p : owned)
      ops.release(p);
  };
  auto take = [&](size_t n) -> void* {
    auto p = ops.allocate(n);
    if (!p)
      return nullptr;
    owned.push_back(*p);
    return *p;
  };
  auto* arena = static_cast<std::byte*>(take(bytes));
  auto* packed = static_cast<std::byte*>(take(bytes));
  auto* copy = static_cast<std::byte*>(take(bytes));
  auto* table = static_cast<std::byte**>(take(o.pages * sizeof(std::byte*)));
  if (arena == nullptr || packed == nullptr || copy == nullptr || table == nullptr) {
    release();
    fmt::print(stderr, "bench gpu: not enough device memory for {} pages\n", o.pages);
    return 1;
  }
  // Page i at slot (i * 7919) mod pages: scattered as a page table's pages are.
  std::vector<std::byte*> where(o.pages);
  for (uint32_t i = 0; i < o.pages; ++i)
    where[i] = arena + (uint64_t{i} * 7919 % o.pages) * page_bytes;
  if (auto err = ops.to_device(table, where.data(), o.pages * sizeof(std::byte*))) {
    release();
    fmt::print(stderr, "bench gpu: {}\n", describe(err));
    return 1;
  }
  std::vector<double> gather, scatter, baseline;
  caf::error err;
  for (uint32_t r = 0; r < o.rounds + 1 && !err; ++r) { // round 0 warms up, untimed
    auto start = clock_type::now();
    err = gpu::gather_pages(table, o.pages, page_bytes, packed);
    const double g = seconds_since(start);
    start = clock_type::now();
    if (!err)
      err = gpu::scatter_pages(packed, o.pages, page_bytes, table);
    const double s = seconds_since(start);
    start = clock_type::now();
    if (!err)
      err = ops.on_device(copy, packed, bytes);
    const double c = seconds_since(start);
    if (r > 0) {
      gather.push_back(bytes / g / 1e9);
      scatter.push_back(bytes / s / 1e9);
      baseline.push_back(bytes / c / 1e9);
    }
  }
  release();
  if (err) {
    fmt::print(stderr, "bench gpu: {}\n", describe(err));
    return 1;
  }
  const double base = median(baseline);
  fmt::print("pages: {} of {} KiB ({} MiB), medians of {} rounds\n", o.pages, page_bytes >> 10,
             bytes >> 20, o.rounds);
  fmt::print("{:<22}{:>10.1f} GB/s {:>6.2f}x of a copy within the device (target >= 0.8x)\n",
             "gather", median(gather), median(gather) / base);
  fmt::print("{:<22}{:>10.1f} GB/s {:>6.2f}x\n", "scatter", median(scatter),
             median(scatter) / base);
  fmt::print("{:<22}{:>10.1f} GB/s\n", "copy (baseline)", base);
  return 0;
}

#endif

} // namespace

int bench_gpu(const bench_gpu_options& o) {
  if (auto err = check_options(o)) {
    fmt::print(stderr, "bench gpu: {}\n", describe(err));
    return 2;
  }
  const auto cfg = model_of(o);
  caf::error err = gpu::validate(cfg);
  if (!err)
    err = gpu::check_reference_limits(cfg);
  if (err) {
    fmt::print(stderr, "bench gpu: {}\n", describe(err));
    return 2;
  }
  fmt::print("model: {} layers, d_model {}, {} heads ({} KV), ffn {}, vocab {}; {} prompts of {} "
             "tokens in chunks of {}, {} decode steps\n",
             cfg.layers, cfg.d_model, cfg.heads, cfg.kv_heads, cfg.ffn, cfg.vocab, o.prompts,
             o.prompt_tokens, o.chunk_tokens, o.decode_steps);
  if (o.host_emulation)
    return compare_engines(cfg, o, gpu::make_host_ops(), nullptr);
  auto ops = gpu::make_cuda_ops(o.device);
  if (!ops) {
    fmt::print("skipped: {}\n", describe(ops.error()));
    return 0;
  }
  auto memory = gpu::make_cuda_ops(o.device); // the pages', apart from the engine's own
  if (!memory) {
    fmt::print(stderr, "bench gpu: {}\n", describe(memory.error()));
    return 1;
  }
  int status = compare_engines(cfg, o, std::move(*ops), memory->get());
#ifdef CRESCENT_HAVE_CUDA
  status = std::max(status, compare_pages(cfg, o, **memory));
#endif
  return status;
}

} // namespace crescent::bench
