// The pool's block codecs (gpu/block_codec.hpp): the reference engine's pages through the KV
// codecs and back, the modeled engine's stand-ins sized as a compressed pool would hold them,
// and every block that is not ours refused.
#include "gpu/block_codec.hpp"
#include "gpu/engine.hpp"
#include "gpu/modeled_engine.hpp"
#include "gpu/modeled_profile.hpp"
#include "messages/errors.hpp"
#include "tests/gpu/tiny_profile.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

namespace crescent::gpu {
namespace {

using storage::codec::codec_kind;

model_config small_model() {
  model_config m; // 2 layers, 2 KV heads of 16 channels, 16-token pages
  m.context_tokens_max = 1024;
  return m;
}

block_codec_options options(codec_kind kind) {
  block_codec_options o;
  o.kind = kind;
  o.calibration_prompts = 2;
  o.calibration_prompt_tokens = 64;
  return o;
}

// The KV of a prompt from the reference engine, page by page.
struct prompt_pages {
  std::vector<std::vector<std::byte>> pages;
  std::vector<std::byte*> ptrs;
};

prompt_pages prefill_reference(const model_config& m, uint32_t tokens) {
  prompt_pages p;
  for (uint32_t first = 0; first < tokens; first += m.block_tokens)
    p.pages.emplace_back(m.page_bytes());
  for (auto& page : p.pages)
    p.ptrs.push_back(page.data());
  auto engine = make_reference_engine(m, {});
  EXPECT_TRUE(engine);
  std::vector<uint32_t> t(tokens);
  for (uint32_t i = 0; i < tokens; ++i)
    t[i] = (7 * i + 3) % m.vocab;
  EXPECT_TRUE((*engine)->prefill({p.ptrs, 0}, t));
  return p;
}

double relative_error(std::span<const std::byte> a, std::span<const std::byte> b) {
  const auto* x = reinterpret_cast<const float*>(a.data());
  const auto* y = reinterpret_cast<const float*>(b.data());
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size() / sizeof(float); ++i) {
    err += (double{x[i]} - y[i]) * (double{x[i]} - y[i]);
    norm += double{x[i]} * x[i];
  }
  return std::sqrt(err / norm);
}

TEST(block_codec, every_reference_codec_round_trips_a_prompt_within_its_error) {
  const auto m = small_model();
  auto kv = prefill_reference(m, 40); // two full pages and one of 8 tokens
  for (auto kind : {codec_kind::int8, codec_kind::kivi2, codec_kind::kivi4, codec_kind::kvquant3,
                    codec_kind::kvquant4}) {
    auto codec = make_reference_codec(m, options(kind));
    ASSERT_TRUE(codec) << describe(codec.error());
    EXPECT_EQ((*codec)->kind(), kind);
    for (uint32_t i = 0; i < kv.pages.size(); ++i) {
      const bool last = i + 1 == kv.pages.size();
      const uint32_t tokens = last ? 8 : m.block_tokens;
      std::vector<std::byte> block(m.page_bytes());
      auto n = (*codec)->encode(kv.pages[i], i, tokens, last, block);
      ASSERT_TRUE(n) << describe(n.error());
      EXPECT_EQ(*n, (*codec)->block_bytes(i, tokens, last));
      EXPECT_LT(*n, m.page_bytes()) << storage::codec::to_string(kind);
      std::vector<std::byte> page(m.page_bytes(), std::byte{0x77});
      ASSERT_FALSE((*codec)->decode(std::span{block}.first(*n), i, page));
      // Only the valid tokens are compared: the decoder zeroes the rest of the page.
      const double err = relative_error(kv.pages[i], page);
      EXPECT_LT(err, kind == codec_kind::int8 ? 0.01 : 0.5)
          << storage::codec::to_string(kind) << " page " << i;
      EXPECT_TRUE((*codec)->decode(std::span{block}.first(*n), i + 1, page))
          << "a block read as another page is refused";
    }
  }
}

TEST(block_codec, a_reference_block_that_is_not_ours_is_refused) {
  const auto m = small_model();
  auto kv = prefill_reference(m, 16);
  auto codec = make_reference_codec(m, options(codec_kind::int8));
  ASSERT_TRUE(codec);
  std::vector<std::byte> block(m.page_bytes());
  auto n = (*codec)->encode(kv.pages[0], 0, 16, true, block);
  ASSERT_TRUE(n);
  std::vector<std::byte> page(m.page_bytes());
  auto changed = block;
  changed[*n - 1] ^= std::byte{1};
  EXPECT_TRUE(is((*codec)->decode(std::span{changed}.first(*n), 0, page), errc::checksum_mismatch));
  std::vector<std::byte> garbage(*n, std::byte{0x5a});
  EXPECT_TRUE(is((*codec)->decode(garbage, 0, page), errc::invalid_argument));
  // Another model's pages (another shape) are not this codec's either.
  auto other = m;
  other.kv_heads = 1;
  auto theirs = make_reference_codec(other, options(codec_kind::int8));
  ASSERT_TRUE(theirs);
  std::vector<std::byte> their_page(other.page_bytes());
  EXPECT_TRUE((*theirs)->decode(std::span{block}.first(*n), 0, their_page));
  // KVQuant blocks need the very calibration they were encoded with.
  auto a = options(codec_kind::kvquant4);
  auto b = a;
  b.calibration_seed = 2;
  auto ca = make_reference_codec(m, a);
  auto cb = make_reference_codec(m, b);
  ASSERT_TRUE(ca && cb);
  auto k = (*ca)->encode(kv.pages[0], 0, 16, true, block);
  ASSERT_TRUE(k);
  EXPECT_FALSE((*ca)->decode(std::span{block}.first(*k), 0, page));
  EXPECT_TRUE(is((*cb)->decode(std::span{block}.first(*k), 0, page), errc::not_found));
}

TEST(block_codec, bad_options_name_the_field) {
  const auto m = small_model();
  auto o = options(codec_kind::kivi4);
  o.group_tokens = 12;
  EXPECT_NE(describe(check_block_codec(m, o)).find("codec.group_tokens"), std::string::npos);
  o = options(codec_kind::kvquant4);
  o.calibration_prompt_tokens = 4096;
  EXPECT_NE(describe(check_block_codec(m, o)).find("codec.calibration_prompt_tokens"),
            std::string::npos);
  o.calibration_prompt_tokens = 64;
  o.sink_tokens = 65;
  EXPECT_NE(describe(check_block_codec(m, o)).find("codec.sink_tokens"), std::string::npos);
  auto odd = m;
  odd.d_model = 40; // heads of 10 channels: codes pack by rows of 8
  EXPECT_TRUE(check_block_codec(odd, options(codec_kind::int8)));
  EXPECT_FALSE(check_block_codec(odd, options(codec_kind::none)));
  EXPECT_FALSE(make_reference_codec(m, options(codec_kind::none)))
      << "none is no codec: pages are stored as they are";
}

TEST(block_codec, a_page_sent_as_ranges_of_layers_decodes_in_place) {
  const auto m = small_model(); // 2 layers
  auto kv = prefill_reference(m, 24);
  const size_t layer_bytes = m.page_bytes() / m.layers;
  for (auto kind : {codec_kind::int8, codec_kind::kivi4, codec_kind::kvquant4}) {
    SCOPED_TRACE(storage::codec::to_string(kind));
    auto codec = make_reference_codec(m, options(kind));
    ASSERT_TRUE(codec);
    for (uint32_t i = 0; i < kv.pages.size(); ++i) {
      const bool last = i + 1 == kv.pages.size();
      const uint32_t tokens = last ? 8 : 16;
      // Layer 0 and layer 1 as two blocks, each at its range's offset, as the hand-off writes.
      std::vector<std::byte> received(m.page_bytes(), std::byte{0x33});
      for (uint32_t l = 0; l < m.layers; ++l) {
        const size_t n = (*codec)->slice_bytes(l, 1, i, tokens, last);
        ASSERT_GT(n, 0u);
        EXPECT_LT(n, layer_bytes);
        auto k = (*codec)->encode_slice(kv.pages[i], l, 1, i, tokens, last,
                                        std::span{received}.subspan(l * layer_bytes, layer_bytes));
        ASSERT_TRUE(k) << describe(k.error());
        EXPECT_EQ(*k, n);
      }
      std::vector<std::byte> scratch(m.page_bytes());
      ASSERT_FALSE((*codec)->decode_slices(received, i, scratch));
      EXPECT_LT(relative_error(kv.pages[i], received), kind == codec_kind::int8 ? 0.01 : 0.5);
      // The whole page as one block decodes the same way.
      std::vector<std::byte> whole(m.page_bytes(), std::byte{0x33});
      ASSERT_TRUE((*codec)->encode_slice(kv.pages[i], 0, m.layers, i, tokens, last, whole));
      ASSERT_FALSE((*codec)->decode_slices(whole, i, scratch));
      EXPECT_EQ(whole, received) << "the same values, ranges or not";
      // Read as another page, or with a layer that never came, it fails.
      EXPECT_TRUE((*codec)->decode_slices(whole, i + 1, scratch));
    }
  }
  auto codec = make_reference_codec(m, options(codec_kind::int8));
  std::vector<std::byte> page(m.page_bytes()), scratch(m.page_bytes());
  ASSERT_TRUE((*codec)->encode_slice(kv.pages[0], 0, 1, 0, 16, false, page));
  EXPECT_TRUE((*codec)->decode_slices(page, 0, scratch)) << "layer 1 never came";
  EXPECT_FALSE((*codec)->encode_slice(kv.pages[0], 1, 2, 0, 16, false, page))
      << "layers past the model";
}

// The paper's model: LLaMA3-70B, 80 layers of 8 KV heads of 128 channels, fp16, 512-token pages.
model_config paper_model() {
  model_config m;
  m.layers = 80;
  m.d_model = 8192;
  m.heads = 64;
  m.kv_heads = 8;
  m.ffn = 28672;
  m.vocab = 128256;
  m.block_tokens = 512;
  m.kv_element_bytes = 2;
  m.context_tokens_max = 131072;
  return m;
}

TEST(block_codec, modeled_blocks_are_the_codecs_sizes_over_the_stand_ins_scale) {
  const auto m = paper_model();
  const uint64_t scale = m.page_bytes() / standin_page_bytes(m);
  for (auto kind : {codec_kind::int8, codec_kind::kivi2, codec_kind::kivi4, codec_kind::kvquant3,
                    codec_kind::kvquant4}) {
    auto codec = make_modeled_codec(m, options(kind));
    ASSERT_TRUE(codec) << describe(codec.error());
    const size_t real = (*codec)->full_block_model_bytes();
    const double ratio = static_cast<double>(m.page_bytes()) / static_cast<double>(real);
    // Issue 23's ratios against fp16: int8 1.9x, 4-bit 3.5x, KIVI 2-bit 6x.
    const double want = kind == codec_kind::int8       ? 1.9
                        : kind == codec_kind::kivi2    ? 6.0
                        : kind == codec_kind::kvquant3 ? 4.5
                                                       : 3.5;
    EXPECT_GE(ratio, want) << storage::codec::to_string(kind);
    const size_t stored = (*codec)->full_block_bytes();
    EXPECT_EQ(stored % 8, 0u);
    EXPECT_GE(stored * scale, real);
    EXPECT_LT(stored * scale, real + 8 * scale) << "rounded up to 8 stand-in bytes at most";
    EXPECT_LT((*codec)->block_bytes(3, 100, false), stored) << "a partial block stores less";
  }
}

// A modeled engine's pages after a prefill of `tokens` tokens.
struct standin_prompt {
  std::vector<std::vector<std::byte>> pages;
  std::vector<std::byte*> ptrs;
};

standin_prompt prefill_modeled(const model_config& m, uint32_t tokens) {
  const auto p = tiny_profile_of(m);
  auto engine = make_modeled_engine(m, std::make_shared<const modeled_profile>(p));
  EXPECT_TRUE(engine) << describe(engine.error());
  standin_prompt out;
  for (uint32_t first = 0; first < tokens; first += m.block_tokens)
    out.pages.emplace_back(standin_page_bytes(m));
  for (auto& page : out.pages)
    out.ptrs.push_back(page.data());
  std::vector<uint32_t> t(tokens);
  std::iota(t.begin(), t.end(), 1u);
  EXPECT_TRUE((*engine)->prefill({out.ptrs, 0}, t));
  return out;
}

TEST(block_codec, a_modeled_block_decodes_to_the_very_stand_in_page) {
  auto m = paper_model();
  m.block_tokens = 16; // short prompts: two pages and a partial one
  auto kv = prefill_modeled(m, 40);
  auto codec = make_modeled_codec(m, options(codec_kind::kvquant4));
  ASSERT_TRUE(codec);
  for (uint32_t i = 0; i < kv.pages.size(); ++i) {
    const bool last = i + 1 == kv.pages.size();
    const uint32_t tokens = last ? 8 : 16;
    std::vector<std::byte> block(standin_page_bytes(m));
    auto n = (*codec)->encode(kv.pages[i], i, tokens, last, block);
    ASSERT_TRUE(n) << describe(n.error());
    EXPECT_EQ(*n, (*codec)->block_bytes(i, tokens, last));
    std::vector<std::byte> page(standin_page_bytes(m));
    ASSERT_FALSE((*codec)->decode(std::span{block}.first(*n), i, page));
    EXPECT_EQ(page, kv.pages[i]) << "page " << i;
    // Refused: another position, a changed pad byte, a short read, the wrong token count.
    EXPECT_TRUE((*codec)->decode(std::span{block}.first(*n), i + 1, page));
    auto padded = block;
    padded[*n - 1] = std::byte{1};
    EXPECT_TRUE((*codec)->decode(std::span{padded}.first(*n), i, page));
    EXPECT_TRUE((*codec)->decode(std::span{block}.first(*n - 8), i, page));
    EXPECT_FALSE((*codec)->encode(kv.pages[i], i, tokens - 1, last, block));
  }
  // Sent as ranges of layers: a one-layer range (64 bytes of stand-in) is too small for a block
  // and goes as it is; longer ones are blocks. Decoded in place, the page is the very same.
  const auto& page1 = kv.pages[1];
  EXPECT_EQ((*codec)->slice_bytes(0, 1, 1, 16, false), 0u);
  std::vector<std::byte> received(standin_page_bytes(m));
  std::memcpy(received.data(), page1.data(), standin_layer_bytes); // layer 0 as it is
  for (uint32_t first = 1; first < m.layers; first += 8) {
    const uint32_t count = std::min(8u, m.layers - first);
    ASSERT_GT((*codec)->slice_bytes(first, count, 1, 16, false), 0u) << first;
    auto out = std::span{received}.subspan(first * standin_layer_bytes);
    ASSERT_TRUE((*codec)->encode_slice(page1, first, count, 1, 16, false, out));
  }
  std::vector<std::byte> scratch(standin_page_bytes(m));
  ASSERT_FALSE((*codec)->decode_slices(received, 1, scratch));
  EXPECT_EQ(received, page1);
  // A page with a layer that never arrived is not a block.
  auto broken = kv.pages[0];
  std::memset(broken.data() + standin_layer_bytes, 0, standin_layer_bytes);
  std::vector<std::byte> block(standin_page_bytes(m));
  EXPECT_FALSE((*codec)->encode(broken, 0, 16, false, block));
}

} // namespace
} // namespace crescent::gpu
