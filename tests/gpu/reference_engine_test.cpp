// The reference engine: config validation, bitwise independence of KV and tokens from
// chunking and batching, seeds, error paths, modeled timing and a pinned greedy generation.
#include "gpu/engine.hpp"
#include "gpu/model_config.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace crescent::gpu {

// Names a shape in GoogleTest's messages instead of dumping its bytes.
void PrintTo(const model_config& cfg, std::ostream* os) {
  *os << "{layers " << cfg.layers << ", d_model " << cfg.d_model << ", heads " << cfg.heads
      << ", kv_heads " << cfg.kv_heads << ", ffn " << cfg.ffn << ", vocab " << cfg.vocab
      << ", block_tokens " << cfg.block_tokens << "}";
}

namespace {

// Page memory for one sequence: pages side by side in one buffer, with guard bytes before and
// after that no call may touch. Filled with a non-zero pattern so that writes show.
struct kv_buffer {
  static constexpr size_t guard = 64;
  static constexpr std::byte fill{0x5a};

  kv_buffer(const model_config& cfg, size_t n_pages)
      : page_bytes(cfg.page_bytes()), bytes(2 * guard + n_pages * page_bytes, fill) {
    for (size_t p = 0; p < n_pages; ++p)
      pages.push_back(bytes.data() + guard + p * page_bytes);
  }

  sequence_ref seq(uint32_t length) const { return {std::span<std::byte* const>(pages), length}; }

  // Bytes of the pages only (guards excluded), for comparing two buffers.
  std::vector<std::byte> page_bytes_copy() const {
    return {bytes.begin() + guard, bytes.end() - guard};
  }

  size_t page_bytes;
  std::vector<std::byte> bytes;
  std::vector<std::byte*> pages;
};

std::vector<uint32_t> make_prompt(size_t n, uint32_t vocab, uint64_t salt) {
  std::vector<uint32_t> out;
  uint64_t s = 0x243f6a8885a308d3ull ^ salt;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out.push_back(static_cast<uint32_t>((s >> 33) % vocab));
  }
  return out;
}

std::unique_ptr<engine> make_engine(const model_config& cfg, engine_options options = {}) {
  auto eng = make_reference_engine(cfg, options);
  EXPECT_TRUE(eng) << describe(eng.error());
  return std::move(*eng);
}

uint32_t prefill_ok(engine& eng, const sequence_ref& seq, std::span<const uint32_t> tokens) {
  auto res = eng.prefill(seq, tokens);
  EXPECT_TRUE(res) << describe(res.error());
  return res ? res->next_token : 0;
}

// Greedy generation: prefill the prompt, then `steps` - 1 decode steps; returns all tokens
// generated.
std::vector<uint32_t> generate(engine& eng, kv_buffer& kv, std::span<const uint32_t> prompt,
                               size_t steps) {
  std::vector<uint32_t> out{prefill_ok(eng, kv.seq(0), prompt)};
  for (size_t i = 1; i < steps; ++i) {
    const sequence_ref seq = kv.seq(static_cast<uint32_t>(prompt.size() + i - 1));
    auto res = eng.decode({&seq, 1}, {&out.back(), 1});
    EXPECT_TRUE(res) << describe(res.error());
    if (!res)
      break;
    out.push_back(res->next_tokens.at(0));
  }
  return out;
}

// Shapes the determinism tests run on: the default, one with odd sizes everywhere (head dim 6,
// 12 query heads per K/V head so a row's lanes straddle attention groups, 5-token pages, an FFN
// width that is no multiple of the matmul tile), and plain multi-head attention (one lane per
// K/V head and token, so decode takes the lane-by-lane path).
model_config odd_config() {
  model_config cfg;
  cfg.layers = 3;
  cfg.d_model = 72;
  cfg.heads = 12;
  cfg.kv_heads = 1;
  cfg.ffn = 100;
  cfg.vocab = 300;
  cfg.block_tokens = 5;
  cfg.context_tokens_max = 512;
  cfg.seed = 3;
  cfg.rope_theta = 500000.0f;
  return cfg;
}

model_config mha_config() {
  model_config cfg;
  cfg.layers = 1;
  cfg.d_model = 24; // head dim 12: one vector of 8 and 4 more
  cfg.heads = 2;
  cfg.kv_heads = 2;
  cfg.ffn = 48;
  cfg.vocab = 64;
  cfg.block_tokens = 32;
  cfg.context_tokens_max = 1024;
  return cfg;
}

class ReferenceEngineShapes : public testing::TestWithParam<model_config> {};

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceEngineShapes, testing::Values(model_config{}, odd_config(), mha_config()),
    [](const auto& info) {
      return std::string{info.index == 0 ? "Default" : info.index == 1 ? "Odd" : "MultiHead"};
    });

// --- (a) validation -----------------------------------------------------------------------

struct bad_config_case {
  std::string name;
  std::function<void(model_config&)> mutate;
  std::string expected_text;
};

TEST(ModelConfig, DefaultIsValid) {
  EXPECT_FALSE(validate(model_config{}));
}

TEST(ModelConfig, RejectsBadFieldsNamingThem) {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float inf = std::numeric_limits<float>::infinity();
  const std::vector<bad_config_case> cases = {
      {"no layers", [](auto& c) { c.layers = 0; }, "model.layers (0)"},
      {"too many layers", [](auto& c) { c.layers = model_layers_max + 1; }, "model.layers"},
      {"no d_model", [](auto& c) { c.d_model = 0; }, "model.d_model (0)"},
      {"huge d_model", [](auto& c) { c.d_model = model_d_model_max + 1; }, "model.d_model"},
      {"no heads", [](auto& c) { c.heads = 0; }, "model.heads (0)"},
      {"heads not dividing", [](auto& c) { c.heads = 3; },
       "model.heads (3) must divide model.d_model (64)"},
      {"no kv heads", [](auto& c) { c.kv_heads = 0; }, "model.kv_heads (0)"},
      {"kv heads not dividing", [](auto& c) { c.kv_heads = 3; },
       "model.kv_heads (3) must divide model.heads (4)"},
      {"more kv heads than heads", [](auto& c) { c.kv_heads = 8; }, "model.kv_heads (8)"},
      {"odd head dim",
       [](auto& c) {
         c.d_model = 12;
         c.heads = 4;
       },
       "head dim 3"},
      {"no ffn", [](auto& c) { c.ffn = 0; }, "model.ffn (0)"},
      {"huge ffn", [](auto& c) { c.ffn = model_ffn_max + 1; }, "model.ffn"},
      {"no vocab", [](auto& c) { c.vocab = 0; }, "model.vocab (0)"},
      {"huge vocab", [](auto& c) { c.vocab = model_vocab_max + 1; }, "model.vocab"},
      {"no block tokens", [](auto& c) { c.block_tokens = 0; }, "model.block_tokens (0)"},
      {"huge block", [](auto& c) { c.block_tokens = 4097; }, "model.block_tokens (4097)"},
      {"context below block",
       [](auto& c) {
         c.block_tokens = 64;
         c.context_tokens_max = 32;
       },
       "model.context_tokens_max (32) must be at least model.block_tokens (64)"},
      {"huge context", [](auto& c) { c.context_tokens_max = model_context_tokens_max + 1; },
       "model.context_tokens_max"},
      {"huge page",
       [](auto& c) {
         c.layers = 64;
         c.d_model = 8192;
         c.heads = 2;
         c.kv_heads = 2;
         c.block_tokens = 4096;
       },
       "page bytes"},
      {"nan theta", [](auto& c) { c.rope_theta = nan; }, "model.rope_theta"},
      {"small theta", [](auto& c) { c.rope_theta = 0.5f; }, "model.rope_theta"},
      {"zero eps", [](auto& c) { c.norm_eps = 0.0f; }, "model.norm_eps"},
      {"infinite eps", [](auto& c) { c.norm_eps = inf; }, "model.norm_eps"},
  };
  for (const auto& tc : cases) {
    model_config cfg;
    tc.mutate(cfg);
    const caf::error err = validate(cfg);
    ASSERT_TRUE(err) << tc.name;
    EXPECT_TRUE(is(err, errc::bad_config)) << tc.name << ": " << describe(err);
    EXPECT_NE(describe(err).find(tc.expected_text), std::string::npos)
        << tc.name << ": " << describe(err);
    auto eng = make_reference_engine(cfg);
    EXPECT_FALSE(eng) << tc.name;
  }
}

TEST(ModelConfig, FactoryRejectsBadTimingRate) {
  engine_options options;
  options.modeled_flops_per_s = 0.0;
  auto eng = make_reference_engine(model_config{}, options);
  ASSERT_FALSE(eng);
  EXPECT_TRUE(is(eng.error(), errc::bad_config));
  EXPECT_NE(describe(eng.error()).find("modeled_flops_per_s"), std::string::npos);
}

TEST(ModelConfig, FingerprintAndKeyRootCoverFieldsThatChangeKv) {
  const model_config base;
  EXPECT_EQ(base.fingerprint(), model_config{}.fingerprint());
  EXPECT_EQ(base.key_root(), model_config{}.key_root());
  const std::vector<std::function<void(model_config&)>> changes = {
      [](auto& c) { c.layers = 3; },
      [](auto& c) { c.d_model = 128; },
      [](auto& c) { c.heads = 8; },
      [](auto& c) { c.kv_heads = 4; },
      [](auto& c) { c.ffn = 160; },
      [](auto& c) { c.vocab = 512; },
      [](auto& c) { c.block_tokens = 32; },
      [](auto& c) { c.seed = 2; },
      [](auto& c) { c.rope_theta = 500000.0f; },
      [](auto& c) { c.norm_eps = 1e-6f; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    model_config cfg;
    changes[i](cfg);
    EXPECT_NE(cfg.fingerprint(), base.fingerprint()) << "change " << i;
    EXPECT_NE(cfg.key_root(), base.key_root()) << "change " << i;
  }
  model_config longer;
  longer.context_tokens_max = 4096; // bounds growth only; KV bytes are the same
  EXPECT_EQ(longer.fingerprint(), base.fingerprint());
  EXPECT_EQ(longer.key_root(), base.key_root());
  // The layout's version leads the record both are taken over.
  const auto record = base.kv_record();
  EXPECT_EQ(static_cast<uint8_t>(record[0]), 1u) << "kv_format_version, little-endian";
}

// --- (b) chunked prefill ------------------------------------------------------------------

TEST_P(ReferenceEngineShapes, ChunkedPrefillIsBitIdenticalToWholePrefill) {
  const model_config cfg = GetParam();
  auto eng = make_engine(cfg);
  const auto prompt = make_prompt(150, cfg.vocab, 1);
  const size_t pages = (150 + cfg.block_tokens - 1) / cfg.block_tokens;
  kv_buffer whole(cfg, pages);
  const uint32_t whole_next = prefill_ok(*eng, whole.seq(0), prompt);

  // Chunks of 5 (so the next ones start mid-page), then 1, 7, 16, 33, 70 (more than the rows
  // the model computes at once) in turn.
  const std::vector<size_t> sizes = {5, 1, 7, 16, 33, 70};
  kv_buffer chunked(cfg, pages);
  uint32_t chunked_next = 0;
  size_t done = 0;
  for (size_t i = 0; done < prompt.size(); ++i) {
    const size_t n = std::min(sizes[i % sizes.size()], prompt.size() - done);
    chunked_next = prefill_ok(*eng, chunked.seq(static_cast<uint32_t>(done)),
                              std::span(prompt).subspan(done, n));
    done += n;
  }
  EXPECT_EQ(chunked_next, whole_next);
  EXPECT_EQ(0, std::memcmp(chunked.bytes.data(), whole.bytes.data(), whole.bytes.size()));
}

TEST_P(ReferenceEngineShapes, LayerRangesInTurnAreBitIdenticalToWholePrefill) {
  // Layer-wise streaming and pipeline stages compute a chunk a range of layers at a time, the
  // stream carried between ranges; chunks of 70 rows span two of the model's row groups.
  const model_config cfg = GetParam();
  auto eng = make_engine(cfg);
  const auto prompt = make_prompt(150, cfg.vocab, 3);
  const size_t pages = (150 + cfg.block_tokens - 1) / cfg.block_tokens;
  kv_buffer whole(cfg, pages);
  const uint32_t whole_next = prefill_ok(*eng, whole.seq(0), prompt);
  kv_buffer layered(cfg, pages);
  uint32_t layered_next = 0;
  for (size_t done = 0; done < prompt.size();) {
    const size_t n = std::min<size_t>(70, prompt.size() - done);
    const auto chunk = std::span(prompt).subspan(done, n);
    std::vector<float> stream(eng->stream_bytes(static_cast<uint32_t>(n)) / sizeof(float));
    auto bytes = std::as_writable_bytes(std::span(stream));
    for (uint32_t l = 0; l < cfg.layers; ++l) {
      auto r =
          eng->prefill_layers(layered.seq(static_cast<uint32_t>(done)), chunk, {l, l + 1}, bytes);
      ASSERT_TRUE(r) << describe(r.error());
      if (l + 1 == cfg.layers)
        layered_next = r->next_token;
    }
    done += n;
  }
  EXPECT_EQ(layered_next, whole_next);
  EXPECT_EQ(0, std::memcmp(layered.bytes.data(), whole.bytes.data(), whole.bytes.size()));
  // Each range wrote only its own slice of every page.
  const auto first = eng->layer_slice({0, 1});
  EXPECT_EQ(first.offset, 0u);
  EXPECT_EQ(first.length * cfg.layers, cfg.page_bytes());
}

TEST(ReferenceEngine, LayerRangesAreChecked) {
  model_config cfg;
  auto eng = make_engine(cfg);
  const auto prompt = make_prompt(8, cfg.vocab, 4);
  kv_buffer kv(cfg, 1);
  std::vector<float> stream(eng->stream_bytes(8) / sizeof(float));
  auto bytes = std::as_writable_bytes(std::span(stream));
  EXPECT_FALSE(eng->prefill_layers(kv.seq(0), prompt, {1, 1}, bytes));
  EXPECT_FALSE(eng->prefill_layers(kv.seq(0), prompt, {0, cfg.layers + 1}, bytes));
  EXPECT_FALSE(eng->prefill_layers(kv.seq(0), prompt, {0, 1}, bytes.first(bytes.size() - 4)))
      << "a stream too short for the chunk";
  EXPECT_TRUE(eng->prefill_layers(kv.seq(0), prompt, {0, cfg.layers}, {}))
      << "the whole model needs no stream";
}

TEST_P(ReferenceEngineShapes, ContinuesFromACopiedPrefix) {
  // A prefix prefilled elsewhere and copied in (as from the cache) continues exactly like a
  // monolithic prefill.
  const model_config cfg = GetParam();
  auto eng = make_engine(cfg);
  auto other = make_engine(cfg);
  const auto prompt = make_prompt(90, cfg.vocab, 11);
  const size_t pages = (90 + cfg.block_tokens - 1) / cfg.block_tokens;
  kv_buffer whole(cfg, pages);
  const uint32_t whole_next = prefill_ok(*eng, whole.seq(0), prompt);

  const size_t prefix = 60 / cfg.block_tokens * cfg.block_tokens; // whole pages, as cached
  kv_buffer elsewhere(cfg, pages);
  prefill_ok(*other, elsewhere.seq(0), std::span(prompt).first(prefix));
  kv_buffer resumed(cfg, pages);
  std::memcpy(resumed.pages[0], elsewhere.pages[0], prefix / cfg.block_tokens * cfg.page_bytes());
  EXPECT_EQ(prefill_ok(*eng, resumed.seq(static_cast<uint32_t>(prefix)),
                       std::span(prompt).subspan(prefix)),
            whole_next);
  EXPECT_EQ(resumed.bytes, whole.bytes);
}

TEST_P(ReferenceEngineShapes, DecodeStepsMatchOnePrefillOfTheSameTokens) {
  const model_config cfg = GetParam();
  auto eng = make_engine(cfg);
  const auto prompt = make_prompt(21, cfg.vocab, 2);
  kv_buffer stepped(cfg, 33 / cfg.block_tokens + 1);
  const auto generated = generate(*eng, stepped, prompt, 12);

  // Prefill prompt + all generated tokens but the last in one call: the same KV, and the
  // greedy token after them is the last generated one.
  std::vector<uint32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end() - 1);
  kv_buffer once(cfg, 33 / cfg.block_tokens + 1);
  EXPECT_EQ(prefill_ok(*eng, once.seq(0), all), generated.back());
  EXPECT_EQ(0, std::memcmp(stepped.bytes.data(), once.bytes.data(), once.bytes.size()));
}

// --- (c) batched decode -------------------------------------------------------------------

TEST_P(ReferenceEngineShapes, BatchedDecodeIsBitIdenticalToDecodingAlone) {
  const model_config cfg = GetParam();
  auto eng = make_engine(cfg);
  const std::vector<std::vector<uint32_t>> prompts = {
      make_prompt(10, cfg.vocab, 3), make_prompt(37, cfg.vocab, 4), make_prompt(3, cfg.vocab, 5),
      make_prompt(16, cfg.vocab, 6)};
  const size_t steps = 15;
  const size_t pages = (37 + steps + cfg.block_tokens - 1) / cfg.block_tokens;

  std::vector<kv_buffer> alone;
  std::vector<std::vector<uint32_t>> alone_tokens;
  for (const auto& prompt : prompts) {
    alone.emplace_back(cfg, pages);
    alone_tokens.push_back(generate(*eng, alone.back(), prompt, steps));
  }

  std::vector<kv_buffer> batched;
  std::vector<std::vector<uint32_t>> batched_tokens(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    batched.emplace_back(cfg, pages);
    batched_tokens[s].push_back(prefill_ok(*eng, batched[s].seq(0), prompts[s]));
  }
  // The batch lists the sequences in reverse order, to be sure position in it does not matter.
  for (size_t step = 1; step < steps; ++step) {
    std::vector<sequence_ref> seqs;
    std::vector<uint32_t> tokens;
    for (size_t s = prompts.size(); s-- > 0;) {
      seqs.push_back(batched[s].seq(static_cast<uint32_t>(prompts[s].size() + step - 1)));
      tokens.push_back(batched_tokens[s].back());
    }
    auto res = eng->decode(seqs, tokens);
    ASSERT_TRUE(res) << describe(res.error());
    ASSERT_EQ(res->next_tokens.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
      batched_tokens[prompts.size() - 1 - i].push_back(res->next_tokens[i]);
  }
  for (size_t s = 0; s < prompts.size(); ++s) {
    EXPECT_EQ(batched_tokens[s], alone_tokens[s]) << "sequence " << s;
    EXPECT_EQ(batched[s].bytes, alone[s].bytes) << "sequence " << s;
  }
}

TEST(ReferenceEngine, BatchLargerThanOneForwardGroupMatches) {
  // 70 sequences: more than the model computes in one group of rows.
  const model_config cfg;
  auto eng = make_engine(cfg);
  std::vector<kv_buffer> kv;
  std::vector<sequence_ref> seqs;
  std::vector<uint32_t> tokens;
  std::vector<uint32_t> expected;
  for (size_t s = 0; s < 70; ++s) {
    const auto prompt = make_prompt(1 + s % 5, cfg.vocab, 100 + s);
    kv_buffer solo(cfg, 1);
    std::vector<uint32_t> solo_tokens = generate(*eng, solo, prompt, 2);
    expected.push_back(solo_tokens[1]);
    kv.emplace_back(cfg, 1);
    tokens.push_back(prefill_ok(*eng, kv.back().seq(0), prompt));
    seqs.push_back(kv.back().seq(static_cast<uint32_t>(prompt.size())));
  }
  auto res = eng->decode(seqs, tokens);
  ASSERT_TRUE(res) << describe(res.error());
  EXPECT_EQ(res->next_tokens, expected);
}

// --- (d) seeds ----------------------------------------------------------------------------

TEST(ReferenceEngine, SameSeedSameOutputsDifferentSeedDifferentOutputs) {
  model_config cfg;
  cfg.seed = 7;
  auto a = make_engine(cfg);
  auto b = make_engine(cfg);
  cfg.seed = 8;
  auto c = make_engine(cfg);
  const auto prompt = make_prompt(40, 256, 9);
  kv_buffer ka(cfg, 4), kb(cfg, 4), kc(cfg, 4);
  const auto ta = generate(*a, ka, prompt, 20);
  const auto tb = generate(*b, kb, prompt, 20);
  const auto tc = generate(*c, kc, prompt, 20);
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(ka.bytes, kb.bytes);
  EXPECT_NE(ta, tc);
  EXPECT_NE(ka.bytes, kc.bytes);
}

TEST(ReferenceEngine, DifferentPromptsGiveDifferentStreams) {
  const model_config cfg;
  auto eng = make_engine(cfg);
  std::vector<std::vector<uint32_t>> streams;
  for (uint64_t salt = 0; salt < 6; ++salt) {
    kv_buffer kv(cfg, 4);
    streams.push_back(generate(*eng, kv, make_prompt(12, cfg.vocab, 50 + salt), 20));
  }
  size_t distinct_streams = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j)
      seen = seen || streams[j] == streams[i];
    distinct_streams += seen ? 0 : 1;
  }
  EXPECT_GE(distinct_streams, 5u);
  // Nor does a stream collapse into repeating one token.
  for (const auto& s : streams) {
    std::vector<uint32_t> sorted = s;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_GE(std::unique(sorted.begin(), sorted.end()) - sorted.begin(), 3);
  }
}

// --- (e) errors ---------------------------------------------------------------------------

// Runs `call`, which must fail with `code`, and checks that the buffer is byte for byte as it
// was.
void expect_error_untouched(const kv_buffer& kv, errc code,
                            const std::function<caf::error()>& call) {
  const auto before = kv.bytes;
  const caf::error err = call();
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(err, code)) << describe(err);
  EXPECT_TRUE(kv.bytes == before) << describe(err);
}

template <class T>
caf::error error_of(const caf::expected<T>& res) {
  return res ? caf::error{} : res.error();
}

TEST(ReferenceEngine, PrefillErrorsWriteNothing) {
  model_config cfg;
  cfg.context_tokens_max = 64;
  auto eng = make_engine(cfg);
  kv_buffer kv(cfg, 4);
  ASSERT_NE(prefill_ok(*eng, kv.seq(0), make_prompt(10, cfg.vocab, 1)), 9999u);
  std::vector<uint32_t> bad_id = make_prompt(8, cfg.vocab, 2);
  bad_id.back() = cfg.vocab; // the last one: an engine checking late would have written others

  expect_error_untouched(kv, errc::invalid_argument,
                         [&] { return error_of(eng->prefill(kv.seq(10), {})); });
  expect_error_untouched(kv, errc::invalid_argument,
                         [&] { return error_of(eng->prefill(kv.seq(10), bad_id)); });
  // Context: 10 + 60 > 64; the buffer would also be too small, but the limit is reported.
  expect_error_untouched(kv, errc::limit_exceeded, [&] {
    return error_of(eng->prefill(kv.seq(10), make_prompt(60, cfg.vocab, 3)));
  });
  // Pages: two pages (32 tokens) for 10 + 30 tokens.
  std::vector<std::byte*> two(kv.pages.begin(), kv.pages.begin() + 2);
  expect_error_untouched(kv, errc::out_of_range, [&] {
    return error_of(eng->prefill({two, 10}, make_prompt(30, cfg.vocab, 4)));
  });
  std::vector<std::byte*> with_null = kv.pages;
  with_null[1] = nullptr;
  expect_error_untouched(kv, errc::invalid_argument, [&] {
    return error_of(eng->prefill({with_null, 10}, make_prompt(10, cfg.vocab, 5)));
  });
  std::vector<std::byte*> misaligned = kv.pages;
  misaligned[1] += 2;
  expect_error_untouched(kv, errc::invalid_argument, [&] {
    return error_of(eng->prefill({misaligned, 10}, make_prompt(10, cfg.vocab, 6)));
  });
  // A null page past the ones needed is fine.
  std::vector<std::byte*> null_tail = kv.pages;
  null_tail[3] = nullptr;
  EXPECT_TRUE(eng->prefill({null_tail, 10}, make_prompt(10, cfg.vocab, 7)));
}

TEST(ReferenceEngine, DecodeErrorsWriteNothing) {
  const model_config cfg;
  auto eng = make_engine(cfg);
  kv_buffer a(cfg, 2), b(cfg, 2);
  const uint32_t ta = prefill_ok(*eng, a.seq(0), make_prompt(5, cfg.vocab, 1));
  const uint32_t tb = prefill_ok(*eng, b.seq(0), make_prompt(32, cfg.vocab, 2));
  const std::vector<sequence_ref> both = {a.seq(5), b.seq(32)}; // b's pages are full
  const std::vector<uint32_t> tokens = {ta, tb};

  expect_error_untouched(a, errc::invalid_argument, [&] {
    return error_of(eng->decode(both, {tokens.data(), 1}));
  });
  expect_error_untouched(a, errc::invalid_argument, [&] { return error_of(eng->decode({}, {})); });
  // The first sequence is fine, the second has no room: nothing is written for either.
  expect_error_untouched(a, errc::out_of_range,
                         [&] { return error_of(eng->decode(both, tokens)); });
  const std::vector<uint32_t> bad_id = {ta, cfg.vocab + 5};
  const std::vector<sequence_ref> ok = {a.seq(5), b.seq(20)};
  expect_error_untouched(a, errc::invalid_argument,
                         [&] { return error_of(eng->decode(ok, bad_id)); });
  auto res = eng->decode(ok, bad_id);
  ASSERT_FALSE(res);
  EXPECT_NE(describe(res.error()).find("sequence 1"), std::string::npos) << describe(res.error());
}

TEST(ReferenceEngine, WritesOnlyTheSlotsOfNewTokens) {
  model_config cfg;
  cfg.layers = 2;
  cfg.kv_heads = 2;
  auto eng = make_engine(cfg);
  kv_buffer kv(cfg, 6);
  ASSERT_TRUE(eng->prefill(kv.seq(0), make_prompt(20, cfg.vocab, 1)));
  const auto before = kv.bytes;
  const uint32_t first = 20, count = 30; // tokens [20, 50): pages 1..3
  ASSERT_TRUE(eng->prefill(kv.seq(first), make_prompt(count, cfg.vocab, 2)));

  // Every float slot outside [first, first + count), and both guards, must be unchanged.
  const size_t hd = cfg.head_dim();
  const size_t slot_bytes = hd * sizeof(float);
  size_t changed_outside = 0, changed_inside = 0;
  for (size_t p = 0; p < kv.pages.size(); ++p)
    for (size_t slab = 0; slab < size_t{cfg.layers} * 2 * cfg.kv_heads; ++slab)
      for (size_t t = 0; t < cfg.block_tokens; ++t) {
        const size_t pos = p * cfg.block_tokens + t;
        const size_t off =
            kv_buffer::guard + p * kv.page_bytes + (slab * cfg.block_tokens + t) * slot_bytes;
        const bool same = std::memcmp(kv.bytes.data() + off, before.data() + off, slot_bytes) == 0;
        const bool inside = pos >= first && pos < first + count;
        changed_outside += (!same && !inside) ? 1 : 0;
        changed_inside += (!same && inside) ? 1 : 0;
      }
  EXPECT_EQ(changed_outside, 0u);
  EXPECT_EQ(changed_inside, size_t{count} * cfg.layers * 2 * cfg.kv_heads);
  EXPECT_EQ(0, std::memcmp(kv.bytes.data(), before.data(), kv_buffer::guard));
  EXPECT_EQ(0, std::memcmp(kv.bytes.data() + kv.bytes.size() - kv_buffer::guard,
                           before.data() + before.size() - kv_buffer::guard, kv_buffer::guard));
}

// --- (f) timing ---------------------------------------------------------------------------

TEST(ReferenceEngine, ModeledTimingIsDeterministicAndGrowsWithContext) {
  const model_config cfg;
  engine_options options;
  options.timing = timing_mode::modeled;
  options.modeled_flops_per_s = 1e9;
  auto eng = make_engine(cfg, options);
  const auto prompt = make_prompt(100, cfg.vocab, 1);
  kv_buffer k1(cfg, 8), k2(cfg, 8);
  auto r1 = eng->prefill(k1.seq(0), prompt);
  auto r2 = eng->prefill(k2.seq(0), prompt);
  ASSERT_TRUE(r1 && r2);
  EXPECT_EQ(r1->compute_ns, r2->compute_ns);
  EXPECT_EQ(r1->compute_ns, static_cast<uint64_t>(std::ceil(model_flops(cfg, 0, 100) / 1e9 * 1e9)));

  // A decode step costs more after a longer context, and a batch costs the sum of its parts.
  const uint32_t t = r1->next_token;
  const sequence_ref short_seq = k1.seq(10), long_seq = k2.seq(100);
  auto d_short = eng->decode({&short_seq, 1}, {&t, 1});
  auto d_long = eng->decode({&long_seq, 1}, {&t, 1});
  ASSERT_TRUE(d_short && d_long);
  EXPECT_LT(d_short->compute_ns, d_long->compute_ns);
  const std::vector<sequence_ref> pair = {short_seq, long_seq};
  const std::vector<uint32_t> pair_tokens = {t, t};
  auto d_pair = eng->decode(pair, pair_tokens);
  ASSERT_TRUE(d_pair);
  const double flops = model_flops(cfg, 10, 1) + model_flops(cfg, 100, 1);
  EXPECT_EQ(d_pair->compute_ns, static_cast<uint64_t>(std::ceil(flops / 1e9 * 1e9)));

  EXPECT_LT(model_flops(cfg, 0, 1), model_flops(cfg, 1000, 1));
  EXPECT_EQ(model_flops(cfg, 0, 0), 0.0);
  // Exact count for the default model, one token after no context: per layer 2 * (64*64 +
  // 2*64*32 + 64*64 + 3*64*176) projection flops + 2*2*16*4*1 attention flops, plus the head.
  EXPECT_EQ(model_flops(cfg, 0, 1), 2.0 * (2 * (4096 + 4096 + 4096 + 33792) + 256) + 32768);
}

TEST(ReferenceEngine, MeasuredTimingIsReported) {
  const model_config cfg;
  auto eng = make_engine(cfg);
  kv_buffer kv(cfg, 2);
  auto res = eng->prefill(kv.seq(0), make_prompt(20, cfg.vocab, 1));
  ASSERT_TRUE(res);
  EXPECT_GT(res->compute_ns, 0u);
}

// --- (g) golden -----------------------------------------------------------------------------

TEST(ReferenceEngine, GreedyGenerationIsPinned) {
  const model_config cfg;
  auto eng = make_engine(cfg);
  const std::vector<uint32_t> prompt = {1, 17, 42, 99, 200, 3, 255, 128, 64, 7};
  kv_buffer kv(cfg, 2);
  const auto tokens = generate(*eng, kv, prompt, 20);
  // Pinned from this build on x86-64 (AVX2 and SSE paths agree bit for bit). A change here
  // means the engine's arithmetic changed: bump kv_format_version in model_config.cpp too.
  const std::vector<uint32_t> expected = {123, 124, 202, 223, 49,  184, 215, 199, 252, 166,
                                          158, 254, 156, 88,  205, 26,  64,  117, 155, 150};
  EXPECT_EQ(tokens, expected);
}

} // namespace
} // namespace crescent::gpu
