// The modeled engine: exact modeled times on hand-computed cases, and its stand-in pages, which
// must carry the same data-path guarantees as the reference engine's real KV.
#include "gpu/modeled_engine.hpp"
#include "messages/errors.hpp"
#include "tests/gpu/tiny_profile.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace crescent::gpu {
namespace {

model_config tiny_model(uint32_t block_tokens = 4) {
  return model_of(tiny_profile(), block_tokens, 256);
}

TEST(modeled_profile, prefill_time_is_equation_one_over_the_new_tokens) {
  const auto p = tiny_profile();
  // l (a d ((p + n)^2 - p^2) + b n d^2) = 2 (4 * 4 * 100 + 22 * 10 * 16) = 10240 flops.
  EXPECT_EQ(modeled_prefill_ns(p, 0, 10), 10240u);
  // After 6 cached tokens: 2 (16 * (256 - 36) + 22 * 10 * 16) = 2 (3520 + 3520) = 14080.
  EXPECT_EQ(modeled_prefill_ns(p, 6, 10), 14080u);
  // Chunks add up to one call over the whole prompt.
  EXPECT_EQ(modeled_prefill_ns(p, 0, 4) + modeled_prefill_ns(p, 4, 6),
            modeled_prefill_ns(p, 0, 10));
  EXPECT_EQ(modeled_prefill_ns(p, 0, 0), 0u);
  auto slow = p;
  slow.prefill_mfu = 0.5;
  slow.prefill_call_overhead_s = 1e-6;
  EXPECT_EQ(modeled_prefill_ns(slow, 0, 10), 20480u + 1000u);
}

TEST(modeled_profile, decode_time_reads_weights_and_resident_kv_and_computes) {
  const auto p = tiny_profile();
  const std::vector<uint32_t> contexts{9, 19};
  // Reads: 2000 weight bytes + (10 + 20) tokens * 8 KV bytes = 2240 ns.
  // Flops: sum of 2 (16 (2c + 1) + 22 * 16) = 2 (304 + 352) + 2 (624 + 352) = 3264 ns.
  EXPECT_EQ(modeled_decode_ns(p, contexts, 8), 2240u + 3264u);
  auto step = p;
  step.decode_step_overhead_s = 1e-3;
  step.hbm_efficiency = 0.5;
  EXPECT_EQ(modeled_decode_ns(step, contexts, 8), 4480u + 3264u + 1'000'000u);
  EXPECT_EQ(modeled_decode_ns(p, {}, 8), 0u);
}

TEST(modeled_profile, a_fitted_profile_uses_its_fit) {
  auto p = tiny_profile();
  p.fitted = true;
  p.prefill_base_ns = 1000;
  p.prefill_per_token_ns = 10;
  p.prefill_per_key_ns = 2;
  p.prefill_per_cached_token_ns = 3;
  p.decode_base_ns = 500;
  p.decode_per_sequence_ns = 100;
  p.decode_per_context_token_ns = 1;
  // n = 4 after p = 6: keys 4 * 6 + 4 * 5 / 2 = 34; 1000 + 40 + 68 + 18.
  EXPECT_EQ(modeled_prefill_ns(p, 6, 4), 1126u);
  // Two sequences of 9 and 19 tokens: 500 + 200 + (10 + 20).
  const std::vector<uint32_t> contexts{9, 19};
  EXPECT_EQ(modeled_decode_ns(p, contexts, 8), 730u);
  p.cost_a = 0; // the analytic fields no longer matter
  p.prefill_mfu = 0;
  EXPECT_FALSE(validate(p));
  p.decode_base_ns = -1;
  EXPECT_NE(describe(validate(p)).find("fit.decode_base_ns"), std::string::npos);
}

TEST(modeled_profile, paper_scale_prefill) {
  // LLaMA3-70B on 8 x A800 at 50% MFU: 15,000 tokens from scratch are
  // 80 (4 * 8192 * 15000^2 + 22 * 15000 * 8192^2) = 2.3614980096e15 flops over 1.248e15 flop/s.
  auto p = tiny_profile();
  p.layers = 80;
  p.d_model = 8192;
  p.gpus = 8;
  p.gpu_flops_per_s = 312e12;
  p.prefill_mfu = 0.5;
  EXPECT_EQ(modeled_prefill_ns(p, 0, 15000), 1892225969u);
}

TEST(modeled_profile, validation_names_the_field) {
  auto p = tiny_profile();
  EXPECT_FALSE(validate(p));
  p.prefill_mfu = 1.5;
  EXPECT_NE(describe(validate(p)).find("profile.prefill_mfu"), std::string::npos);
  p = tiny_profile();
  p.parameters = 1e12; // 2 TB of weights on 1 GB of HBM
  EXPECT_NE(describe(validate(p)).find("do not fit"), std::string::npos);
  p = tiny_profile();
  p.gpu_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(validate(p));
  auto m = tiny_model();
  m.layers = 3;
  EXPECT_NE(describe(check_model(tiny_profile(), m)).find("model.layers"), std::string::npos);
}

// A sequence's stand-in pages.
struct pages {
  explicit pages(size_t n) : memory(n * page_bytes) {
    for (size_t i = 0; i < n; ++i)
      ptrs.push_back(memory.data() + i * page_bytes);
  }
  static inline const size_t page_bytes = standin_page_bytes(tiny_model());
  std::vector<std::byte> memory;
  std::vector<std::byte*> ptrs;
};

std::unique_ptr<engine> make() {
  auto e = make_modeled_engine(tiny_model(), std::make_shared<modeled_profile>(tiny_profile()));
  EXPECT_TRUE(e) << describe(e.error());
  return std::move(*e);
}

std::vector<uint32_t> prompt(size_t n) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<uint32_t>((i * 37 + 11) % 1000);
  return t;
}

// Greedy decoding of `steps` tokens after `first`, on pages that hold `length` tokens.
std::vector<uint32_t> decode_all(engine& e, pages& p, uint32_t length, uint32_t first,
                                 size_t steps) {
  std::vector<uint32_t> out{first};
  for (size_t i = 0; i < steps; ++i) {
    sequence_ref seq{p.ptrs, length++};
    const uint32_t in = out.back();
    auto r = e.decode({&seq, 1}, {&in, 1});
    EXPECT_TRUE(r) << describe(r.error());
    out.push_back(r->next_tokens[0]);
  }
  return out;
}

TEST(modeled_engine, chunking_changes_nothing) {
  auto e = make();
  EXPECT_EQ(e->page_memory_bytes(), 2 * standin_layer_bytes) << "a slot for each layer";
  const auto t = prompt(10);
  pages whole(8), chunked(8);
  auto a = e->prefill({whole.ptrs, 0}, t);
  ASSERT_TRUE(a);
  auto b1 = e->prefill({chunked.ptrs, 0}, std::span{t}.first(3));
  auto b2 = e->prefill({chunked.ptrs, 3}, std::span{t}.subspan(3));
  ASSERT_TRUE(b1 && b2);
  EXPECT_EQ(a->next_token, b2->next_token);
  EXPECT_EQ(a->compute_ns, b1->compute_ns + b2->compute_ns);
  EXPECT_EQ(0, std::memcmp(whole.memory.data(), chunked.memory.data(), 3 * pages::page_bytes));
  EXPECT_EQ(decode_all(*e, whole, 10, a->next_token, 6),
            decode_all(*e, chunked, 10, b2->next_token, 6));
}

TEST(modeled_engine, a_copied_prefix_decodes_as_the_original) {
  auto e = make();
  const auto t = prompt(11);
  pages mono(8), disagg(8);
  auto a = e->prefill({mono.ptrs, 0}, t);
  ASSERT_TRUE(a);
  // Disaggregated: the first two pages arrive from a pool (copied), the rest is computed.
  pages source(8);
  ASSERT_TRUE(e->prefill({source.ptrs, 0}, std::span{t}.first(8)));
  std::memcpy(disagg.ptrs[0], source.ptrs[0], 2 * pages::page_bytes);
  auto b = e->prefill({disagg.ptrs, 8}, std::span{t}.subspan(8));
  ASSERT_TRUE(b);
  EXPECT_EQ(a->next_token, b->next_token);
  EXPECT_EQ(decode_all(*e, mono, 11, a->next_token, 9),
            decode_all(*e, disagg, 11, b->next_token, 9));
}

TEST(modeled_engine, a_prompt_found_whole_recomputes_its_last_token) {
  auto e = make();
  const auto t = prompt(10);
  pages p(8);
  auto a = e->prefill({p.ptrs, 0}, t);
  ASSERT_TRUE(a);
  const auto before = p.memory;
  auto again = e->prefill({p.ptrs, 9}, std::span{t}.subspan(9));
  ASSERT_TRUE(again) << describe(again.error());
  EXPECT_EQ(again->next_token, a->next_token);
  EXPECT_EQ(before, p.memory);
}

TEST(modeled_engine, a_missing_page_is_an_error_naming_the_position) {
  auto e = make();
  const auto t = prompt(10);
  pages p(8);
  // Nothing was loaded, yet the prefill claims 8 cached tokens.
  auto r = e->prefill({p.ptrs, 8}, std::span{t}.subspan(8));
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("positions 4 to 7"), std::string::npos) << describe(r.error());
  // Half a page of KV where a whole one is needed.
  ASSERT_TRUE(e->prefill({p.ptrs, 0}, std::span{t}.first(6)));
  r = e->prefill({p.ptrs, 7}, std::span{t}.subspan(7));
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("no KV for position 6"), std::string::npos)
      << describe(r.error());
}

TEST(modeled_engine, pages_of_another_model_or_sequence_are_not_kv) {
  auto e = make();
  auto other_model = tiny_model();
  other_model.seed = 2; // another fingerprint
  auto other = std::move(
      *make_modeled_engine(other_model, std::make_shared<modeled_profile>(tiny_profile())));
  const auto t = prompt(10);
  pages p(8);
  ASSERT_TRUE(other->prefill({p.ptrs, 0}, t));
  EXPECT_FALSE(e->prefill({p.ptrs, 8}, std::span{t}.subspan(8)));
  // Stale stand-ins beyond a sequence's length are overwritten, never read.
  pages stale(8);
  ASSERT_TRUE(e->prefill({stale.ptrs, 0}, prompt(30)));
  pages fresh(8);
  auto a = e->prefill({stale.ptrs, 0}, t);
  auto b = e->prefill({fresh.ptrs, 0}, t);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->next_token, b->next_token);
}

TEST(modeled_engine, a_corrupted_stand_in_changes_the_tokens_or_fails) {
  auto e = make();
  const auto t = prompt(10);
  pages good(8), bad(8);
  auto a = e->prefill({good.ptrs, 0}, t);
  ASSERT_TRUE(e->prefill({bad.ptrs, 0}, std::span{t}.first(8)));
  bad.memory[standin_layer_bytes + 20] ^= std::byte{1}; // page 0's last layer's content hash
  auto b = e->prefill({bad.ptrs, 8}, std::span{t}.subspan(8));
  ASSERT_TRUE(a && b);
  EXPECT_NE(decode_all(*e, good, 10, a->next_token, 8), decode_all(*e, bad, 10, b->next_token, 8));
}

TEST(modeled_engine, layer_ranges_in_turn_write_what_one_call_writes) {
  auto e = make();
  const auto t = prompt(10);
  pages whole(8), layered(8);
  auto a = e->prefill({whole.ptrs, 0}, t);
  ASSERT_TRUE(a);
  std::vector<std::byte> stream(e->stream_bytes(10));
  auto l0 = e->prefill_layers({layered.ptrs, 0}, t, {0, 1}, stream);
  ASSERT_TRUE(l0) << describe(l0.error());
  // Layer 0 alone is not KV yet: a page whose layers disagree cannot be continued.
  auto early = e->prefill({layered.ptrs, 10}, prompt(11));
  EXPECT_FALSE(early);
  auto l1 = e->prefill_layers({layered.ptrs, 0}, t, {1, 2}, stream);
  ASSERT_TRUE(l1) << describe(l1.error());
  EXPECT_EQ(l1->next_token, a->next_token);
  EXPECT_EQ(whole.memory, layered.memory);
  // The call's overhead counts once; the layers share the rest (to a nanosecond a layer).
  EXPECT_NEAR(static_cast<double>(l0->compute_ns + l1->compute_ns),
              static_cast<double>(a->compute_ns), 2.0);
  EXPECT_EQ(e->layer_slice({1, 2}).offset, standin_layer_bytes);
}

// Pages of 64 tokens: long runs of a page, whose chain an engine computes once per chunk and
// reuses for the chunk's other layer ranges. What it writes must be what a fresh engine computes
// in one call, also for a sequence that shares a page's tokens but not the pages before it.
TEST(modeled_engine, a_chunk_in_layer_ranges_writes_what_a_fresh_engine_writes) {
  const auto model = tiny_model(64);
  auto fresh = [&] {
    return std::move(
        *make_modeled_engine(model, std::make_shared<modeled_profile>(tiny_profile())));
  };
  auto e = fresh();
  auto t = prompt(200);
  auto u = t;
  u[0] += 1; // the same tokens from position 1 on, after another first token
  for (const auto& tokens : {t, u, t}) {
    pages whole(4), layered(4);
    auto a = fresh()->prefill({whole.ptrs, 0}, tokens);
    ASSERT_TRUE(a);
    std::vector<std::byte> stream(e->stream_bytes(100));
    for (uint32_t first : {0u, 100u}) {
      const auto chunk = std::span{tokens}.subspan(first, 100);
      ASSERT_TRUE(e->prefill_layers({layered.ptrs, first}, chunk, {0, 1}, stream));
      auto last = e->prefill_layers({layered.ptrs, first}, chunk, {1, 2}, stream);
      ASSERT_TRUE(last) << describe(last.error());
      if (first == 100) {
        EXPECT_EQ(last->next_token, a->next_token);
      }
    }
    EXPECT_EQ(whole.memory, layered.memory);
  }
  pages pt(4), pu(4);
  ASSERT_TRUE(e->prefill({pt.ptrs, 0}, t));
  ASSERT_TRUE(e->prefill({pu.ptrs, 0}, u));
  EXPECT_NE(0, std::memcmp(pt.ptrs[2], pu.ptrs[2], pages::page_bytes))
      << "page 2's tokens are the same, the pages before them are not";
}

TEST(modeled_engine, a_layer_that_did_not_arrive_or_a_wrong_stream_is_an_error) {
  auto e = make();
  const auto t = prompt(8);
  pages src(8), dst(8);
  ASSERT_TRUE(e->prefill({src.ptrs, 0}, t));
  // Pages 0 and 1 arrive, but only layer 0 of page 1.
  const auto page = pages::page_bytes;
  std::memcpy(dst.ptrs[0], src.ptrs[0], page);
  std::memcpy(dst.ptrs[1], src.ptrs[1], standin_layer_bytes);
  const std::vector<uint32_t> next{5};
  auto r = e->prefill({dst.ptrs, 8}, next);
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("layer 1 of page 1"), std::string::npos)
      << describe(r.error());
  // A stream of another chunk or layer is refused before anything is written.
  std::vector<std::byte> stream(e->stream_bytes(4));
  pages p(8);
  ASSERT_TRUE(e->prefill_layers({p.ptrs, 0}, std::span{t}.first(4), {0, 1}, stream));
  EXPECT_FALSE(e->prefill_layers({p.ptrs, 0}, std::span{t}.subspan(4), {1, 2}, stream));
  EXPECT_FALSE(
      e->prefill_layers({p.ptrs, 0}, std::span{t}.first(4), {0, 1}, std::span{stream}.first(8)))
      << "a stream too short";
}

TEST(modeled_engine, refuses_a_model_its_profile_does_not_describe) {
  auto m = tiny_model();
  m.kv_heads = 2;
  auto e = make_modeled_engine(m, std::make_shared<modeled_profile>(tiny_profile()));
  ASSERT_FALSE(e);
  EXPECT_NE(describe(e.error()).find("model.kv_heads"), std::string::npos);
  EXPECT_FALSE(make_modeled_engine(tiny_model(), nullptr));
}

TEST(modeled_engine, decode_checks_every_sequence_before_writing) {
  auto e = make();
  pages a(8), b(8);
  auto t = prompt(5);
  ASSERT_TRUE(e->prefill({a.ptrs, 0}, t));
  const auto before = a.memory;
  std::vector<sequence_ref> seqs{{a.ptrs, 5}, {b.ptrs, 5}}; // b holds nothing
  std::vector<uint32_t> in{1, 2};
  auto r = e->decode(seqs, in);
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("sequence 1"), std::string::npos);
  EXPECT_EQ(before, a.memory);
}

TEST(shared_cores, calls_beyond_the_cores_share_them) {
  int64_t now = 0;
  shared_cores cores{2, [&] { return now; }};
  EXPECT_EQ(cores.reserve(100), 100u);
  EXPECT_EQ(cores.reserve(50), 50u) << "the second core is free";
  EXPECT_EQ(cores.reserve(10), 15u) << "3 calls on 2 cores: 2/3 of a core each";
  now = 60; // the 50 and the 10 (which took 15) ended; the 100 runs until 100
  EXPECT_EQ(cores.reserve(30), 30u) << "2 calls on 2 cores";
  now = 200;
  EXPECT_EQ(cores.reserve(7), 7u) << "all ended";
}

TEST(shared_cores, a_profile_that_shares_cores_needs_them) {
  auto p = std::make_shared<modeled_profile>(tiny_profile());
  p->shared_cores = 2;
  EXPECT_FALSE(make_modeled_engine(tiny_model(), p));
  int64_t now = 0;
  auto cores = std::make_shared<shared_cores>(1, [&] { return now; });
  auto a = make_modeled_engine(tiny_model(), p, cores);
  auto b = make_modeled_engine(tiny_model(), p, cores);
  ASSERT_TRUE(a && b);
  pages x(8), y(8);
  const auto t = prompt(10);
  auto first = (*a)->prefill({x.ptrs, 0}, t);
  auto second = (*b)->prefill({y.ptrs, 0}, t); // same instant, one core: half of it each
  ASSERT_TRUE(first && second);
  EXPECT_EQ(second->compute_ns, 2 * first->compute_ns);
}

TEST(warmup, the_extra_time_after_idle_is_interpolated_between_the_measured_points) {
  const std::vector<double> idle_ms{10, 100};
  const std::vector<double> extra_ns{1000, 5000};
  EXPECT_EQ(warmup_extra_ns(idle_ms, extra_ns, 0), 0u) << "back to back: none";
  EXPECT_EQ(warmup_extra_ns(idle_ms, extra_ns, 5'000'000), 500u) << "half way to (10 ms, 1000)";
  EXPECT_EQ(warmup_extra_ns(idle_ms, extra_ns, 10'000'000), 1000u);
  EXPECT_EQ(warmup_extra_ns(idle_ms, extra_ns, 55'000'000), 3000u) << "half way to the next";
  EXPECT_EQ(warmup_extra_ns(idle_ms, extra_ns, 1'000'000'000), 5000u) << "flat after the last";
  EXPECT_EQ(warmup_extra_ns({}, {}, 1'000'000'000), 0u) << "no curve: no warm-up";
}

TEST(warmup, a_call_after_its_instance_was_idle_takes_the_warmup_too) {
  auto p = std::make_shared<modeled_profile>(tiny_profile());
  p->shared_cores = 2;
  p->warmup_idle_ms = {10, 100};
  p->prefill_warmup_ns = {0, 0};
  p->decode_warmup_ns = {1000, 5000};
  ASSERT_FALSE(validate(*p));
  int64_t now = 0;
  auto cores = std::make_shared<shared_cores>(2, [&] { return now; });
  auto e = make_modeled_engine(tiny_model(), p, cores);
  ASSERT_TRUE(e);
  pages x(8);
  const auto t = prompt(10);
  ASSERT_TRUE((*e)->prefill({x.ptrs, 0}, t)); // at 0, idle since the start: no prefill warm-up
  const std::vector<uint32_t> ctx{10};
  const uint64_t warm = modeled_decode_ns(*p, ctx, tiny_model().kv_bytes_per_token());
  now = 55'000'000; // the prefill ended at once (ns): 55 ms idle, half way from 10 to 100 ms
  const std::vector<sequence_ref> seqs{{x.ptrs, 10}};
  const std::vector<uint32_t> in{1};
  auto first = (*e)->decode(seqs, in);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->compute_ns, warm + 3000);
  now += static_cast<int64_t>(first->compute_ns); // the next step, back to back
  const std::vector<sequence_ref> next{{x.ptrs, 11}};
  auto second = (*e)->decode(next, in);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->compute_ns,
            modeled_decode_ns(*p, std::vector<uint32_t>{11}, tiny_model().kv_bytes_per_token()));
}

TEST(warmup, a_profile_checks_its_warmup_curve) {
  auto p = tiny_profile();
  p.warmup_idle_ms = {10, 100};
  p.prefill_warmup_ns = {0, 0};
  p.decode_warmup_ns = {1000, 5000};
  auto err = validate(p);
  ASSERT_TRUE(err);
  EXPECT_NE(describe(err).find("needs machine.shared_cores"), std::string::npos) << describe(err);
  p.shared_cores = 2;
  p.warmup_idle_ms = {100, 10};
  EXPECT_NE(describe(validate(p)).find("must increase"), std::string::npos);
  p.warmup_idle_ms = {10, 100};
  p.decode_warmup_ns = {1000};
  EXPECT_NE(describe(validate(p)).find("as many points"), std::string::npos);
  p.decode_warmup_ns = {1000, -1};
  EXPECT_NE(describe(validate(p)).find("warmup.decode_extra_ns"), std::string::npos);
}

} // namespace
} // namespace crescent::gpu
