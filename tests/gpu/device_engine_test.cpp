// The device engine (gpu/cuda/device_engine.hpp) against the CPU reference engine, bit for bit:
// on the host emulation everywhere (the engine's own code and its kernels' per-element
// arithmetic), and on a CUDA device where one exists (skipped with the reason elsewhere).
#include "apps/bench/bench_gpu.hpp"
#include "gpu/cuda/device_engine.hpp"
#include "gpu/engine.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#ifdef CRESCENT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

namespace crescent::gpu {
namespace {

// One sequence's pages, side by side in host memory, filled with a pattern so writes show.
struct host_pages {
  host_pages(const model_config& cfg, size_t n) : bytes(n * cfg.page_bytes(), std::byte{0x5a}) {
    for (size_t p = 0; p < n; ++p)
      pages.push_back(bytes.data() + p * cfg.page_bytes());
  }
  sequence_ref seq(uint32_t length) const { return {pages, length}; }
  std::vector<std::byte> bytes;
  std::vector<std::byte*> pages;
};

std::vector<uint32_t> prompt(size_t n, uint32_t vocab, uint64_t salt) {
  std::vector<uint32_t> out;
  uint64_t s = 0x9e3779b97f4a7c15ull ^ salt;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out.push_back(static_cast<uint32_t>((s >> 33) % vocab));
  }
  return out;
}

std::unique_ptr<engine> reference(const model_config& cfg) {
  auto eng = make_reference_engine(cfg);
  EXPECT_TRUE(eng) << describe(eng.error());
  return eng ? std::move(*eng) : nullptr;
}

std::unique_ptr<engine> emulated(const model_config& cfg,
                                 uint64_t scores_bytes = device_engine_scores_bytes_max) {
  auto eng = make_device_engine(cfg, {}, make_host_ops(), scores_bytes);
  EXPECT_TRUE(eng) << describe(eng.error());
  return eng ? std::move(*eng) : nullptr;
}

model_config grouped_config() {
  model_config cfg;
  cfg.layers = 3;
  cfg.d_model = 96;
  cfg.heads = 6;
  cfg.kv_heads = 3;
  cfg.ffn = 80;
  cfg.vocab = 300;
  cfg.block_tokens = 8;
  cfg.context_tokens_max = 1024;
  cfg.seed = 7;
  return cfg;
}

// Three sequences prefilled in chunks (one longer than a group of 64 rows), then decoded
// together for `steps` steps; returns every token chosen, and leaves the KV in `kv`.
std::vector<uint32_t> serve(engine& eng, std::vector<host_pages>& kv) {
  const auto& cfg = eng.config();
  const std::vector<std::vector<size_t>> chunks = {{37, 113}, {20}, {5, 65}};
  std::vector<uint32_t> out;
  std::vector<uint32_t> lengths, next;
  for (size_t i = 0; i < chunks.size(); ++i) {
    uint32_t length = 0;
    uint32_t token = 0;
    for (size_t c : chunks[i]) {
      const auto tokens = prompt(c, cfg.vocab, 100 * i + length);
      auto res = eng.prefill(kv[i].seq(length), tokens);
      EXPECT_TRUE(res) << describe(res.error());
      if (!res)
        return out;
      length += static_cast<uint32_t>(c);
      token = res->next_token;
    }
    out.push_back(token);
    lengths.push_back(length);
    next.push_back(token);
  }
  for (int step = 0; step < 12; ++step) {
    std::vector<sequence_ref> seqs;
    for (size_t i = 0; i < kv.size(); ++i)
      seqs.push_back(kv[i].seq(lengths[i]));
    auto res = eng.decode(seqs, next);
    EXPECT_TRUE(res) << describe(res.error());
    if (!res)
      return out;
    next = res->next_tokens;
    out.insert(out.end(), next.begin(), next.end());
    for (auto& l : lengths)
      ++l;
  }
  return out;
}

std::vector<host_pages> pages_for(const model_config& cfg) {
  std::vector<host_pages> kv;
  for (int i = 0; i < 3; ++i)
    kv.emplace_back(cfg, (150 + 12 + cfg.block_tokens - 1) / cfg.block_tokens);
  return kv;
}

void expect_same_serving(const model_config& cfg, std::unique_ptr<engine> device) {
  ASSERT_NE(device, nullptr);
  auto ref = reference(cfg);
  ASSERT_NE(ref, nullptr);
  auto ref_kv = pages_for(cfg);
  auto dev_kv = pages_for(cfg);
  const auto expected = serve(*ref, ref_kv);
  const auto got = serve(*device, dev_kv);
  EXPECT_EQ(got, expected);
  for (size_t i = 0; i < ref_kv.size(); ++i)
    EXPECT_TRUE(ref_kv[i].bytes == dev_kv[i].bytes) << "the KV bytes of sequence " << i;
}

TEST(device_engine, host_emulation_computes_the_reference_kv_and_tokens_bit_for_bit) {
  expect_same_serving(model_config{}, emulated(model_config{}));
  expect_same_serving(grouped_config(), emulated(grouped_config()));
  auto one_group = grouped_config();
  one_group.kv_heads = 1; // every query head shares one K/V head
  expect_same_serving(one_group, emulated(one_group));
}

TEST(device_engine, lanes_computed_in_several_passes_give_the_same_bytes) {
  const auto cfg = grouped_config();
  // Scratch for 5 lanes: a group of 64 rows x 6 heads takes 77 passes.
  expect_same_serving(cfg, emulated(cfg, 5 * cfg.context_tokens_max * sizeof(float)));
}

TEST(device_engine, layer_ranges_hand_the_reference_stream_on) {
  const auto cfg = grouped_config();
  auto ref = reference(cfg);
  auto dev = emulated(cfg);
  ASSERT_TRUE(ref && dev);
  host_pages ref_kv(cfg, 16), dev_kv(cfg, 16);
  const auto tokens = prompt(90, cfg.vocab, 3);
  std::vector<std::byte> ref_stream(ref->stream_bytes(90)), dev_stream(dev->stream_bytes(90));
  ASSERT_EQ(ref_stream.size(), dev_stream.size());
  for (layer_range r : {layer_range{0, 1}, layer_range{1, 3}}) {
    auto a = ref->prefill_layers(ref_kv.seq(0), tokens, r, ref_stream);
    auto b = dev->prefill_layers(dev_kv.seq(0), tokens, r, dev_stream);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->next_token, b->next_token);
    if (r.first == 0) {
      EXPECT_TRUE(ref_stream == dev_stream) << "the residual stream after layer 0";
    }
  }
  EXPECT_TRUE(ref_kv.bytes == dev_kv.bytes);
}

TEST(device_engine, bad_calls_and_models_are_refused_with_the_reason) {
  const model_config cfg;
  auto dev = emulated(cfg);
  ASSERT_NE(dev, nullptr);
  host_pages kv(cfg, 2);
  const auto before = kv.bytes;
  const std::vector<uint32_t> bad = {1, cfg.vocab};
  auto res = dev->prefill(kv.seq(0), bad);
  ASSERT_FALSE(res);
  EXPECT_TRUE(is(res.error(), errc::invalid_argument)) << describe(res.error());
  EXPECT_TRUE(kv.bytes == before) << "a refused call writes nothing";
  auto too_long = dev->prefill(kv.seq(0), prompt(33, cfg.vocab, 1));
  ASSERT_FALSE(too_long);
  EXPECT_TRUE(is(too_long.error(), errc::out_of_range)) << describe(too_long.error());

  auto half = cfg;
  half.kv_element_bytes = 2;
  auto refused = make_device_engine(half, {}, make_host_ops());
  ASSERT_FALSE(refused);
  EXPECT_NE(describe(refused.error()).find("kv_element_bytes"), std::string::npos);
  EXPECT_FALSE(make_device_engine(cfg, {}, nullptr));
  EXPECT_FALSE(make_device_engine(cfg, {}, make_host_ops(), 0));
  auto wide = cfg;
  wide.layers = 65; // past the reference engine's limit
  EXPECT_FALSE(make_device_engine(wide, {}, make_host_ops()));
}

TEST(device_engine, modeled_timing_counts_the_reference_flops) {
  const model_config cfg;
  engine_options options;
  options.timing = timing_mode::modeled;
  options.modeled_flops_per_s = 1e9;
  auto dev = make_device_engine(cfg, options, make_host_ops());
  ASSERT_TRUE(dev) << describe(dev.error());
  host_pages kv(cfg, 2);
  auto res = (*dev)->prefill(kv.seq(0), prompt(20, cfg.vocab, 2));
  ASSERT_TRUE(res);
  const double flops = layer_flops(cfg, 0, 20, {0, cfg.layers});
  EXPECT_EQ(res->compute_ns, static_cast<uint64_t>(std::ceil(flops / 1e9 * 1e9)));
}

TEST(device_engine, cuda_engine_matches_the_reference_on_a_device) {
  const auto cfg = grouped_config();
  auto dev = make_cuda_engine(cfg, {});
  if (!dev) {
    EXPECT_TRUE(is(dev.error(), errc::unavailable)) << describe(dev.error());
    GTEST_SKIP() << describe(dev.error());
  }
#ifdef CRESCENT_HAVE_CUDA
  // The same serving with the pages in device memory, copied back to compare.
  auto ref = reference(cfg);
  auto ref_kv = pages_for(cfg);
  auto host_kv = pages_for(cfg);
  std::vector<std::byte*> arenas;
  std::vector<host_pages> dev_kv = pages_for(cfg);
  for (size_t i = 0; i < dev_kv.size(); ++i) {
    std::byte* arena = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&arena), dev_kv[i].bytes.size()), cudaSuccess);
    ASSERT_EQ(
        cudaMemcpy(arena, dev_kv[i].bytes.data(), dev_kv[i].bytes.size(), cudaMemcpyHostToDevice),
        cudaSuccess);
    arenas.push_back(arena);
    for (size_t p = 0; p < dev_kv[i].pages.size(); ++p)
      dev_kv[i].pages[p] = arena + p * cfg.page_bytes();
  }
  const auto expected = serve(*ref, ref_kv);
  const auto got = serve(**dev, dev_kv);
  EXPECT_EQ(got, expected);
  for (size_t i = 0; i < arenas.size(); ++i) {
    ASSERT_EQ(cudaMemcpy(host_kv[i].bytes.data(), arenas[i], host_kv[i].bytes.size(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_TRUE(host_kv[i].bytes == ref_kv[i].bytes) << "the KV bytes of sequence " << i;
    cudaFree(arenas[i]);
  }
#endif
}

TEST(device_engine, the_benchmark_compares_engines_on_the_host_emulation) {
  bench::bench_gpu_options o;
  o.host_emulation = true;
  o.prompts = 3;
  o.prompt_tokens = 70;
  o.chunk_tokens = 33;
  o.decode_steps = 3;
  o.layers = 2;
  o.d_model = 64;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 96;
  o.vocab = 200;
  EXPECT_EQ(bench::bench_gpu(o), 0) << "tokens and KV bytes equal";
  o.chunk_tokens = 71; // longer than the prompt
  EXPECT_EQ(bench::bench_gpu(o), 2);
  o.chunk_tokens = 33;
  o.heads = 3; // d_model not divisible by heads
  EXPECT_EQ(bench::bench_gpu(o), 2);
}

} // namespace
} // namespace crescent::gpu
