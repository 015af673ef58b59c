#include "gpu/block_codec.hpp"

#include "gpu/modeled_engine.hpp"
#include "gpu/reference_model.hpp"
#include "messages/errors.hpp"
#include "storage/codec/kvquant_calibration.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace crescent::gpu {

namespace codec = storage::codec;

namespace {

caf::error field_error(const std::string& field, const std::string& what) {
  return make_error(errc::bad_config, field + " " + what);
}

std::span<const float> floats(std::span<const std::byte> b) {
  return {reinterpret_cast<const float*>(b.data()), b.size() / sizeof(float)};
}

std::span<float> floats(std::span<std::byte> b) {
  return {reinterpret_cast<float*>(b.data()), b.size() / sizeof(float)};
}

// The reference engine's pages are the codecs' own layout: float32
// [layer][K|V][kv_head][token][head_dim].
class reference_codec final : public block_codec {
 public:
  explicit reference_codec(codec::codec_config cfg) : cfg_(std::move(cfg)) {}

  codec::codec_kind kind() const override { return cfg_.kind; }

  size_t block_bytes(uint32_t index, uint32_t tokens, bool last) const override {
    return codec::encoded_bytes(cfg_, tokens, first_position(index), last);
  }

  size_t full_block_bytes() const override {
    return codec::encoded_bytes(cfg_, cfg_.shape.block_tokens, first_position(1), false);
  }
  size_t full_block_model_bytes() const override { return full_block_bytes(); }

  caf::expected<size_t> encode(std::span<const std::byte> page, uint32_t index, uint32_t tokens,
                               bool last, std::span<std::byte> out) const override {
    if (page.size() != cfg_.shape.page_floats() * sizeof(float))
      return make_error(errc::invalid_argument,
                        "a page of " + std::to_string(page.size()) + " bytes for the codec");
    return codec::encode(cfg_, {floats(page), tokens, first_position(index), last}, out);
  }

  caf::error decode(std::span<const std::byte> block, uint32_t index,
                    std::span<std::byte> page) const override {
    if (page.size() != page_bytes())
      return make_error(errc::invalid_argument,
                        "a page of " + std::to_string(page.size()) + " bytes for the codec");
    return decode_with(cfg_, block, index, page);
  }

  size_t slice_bytes(uint32_t first, uint32_t count, uint32_t index, uint32_t tokens,
                     bool last) const override {
    auto c = range_config(first, count);
    if (!c)
      return 0;
    const size_t n = codec::encoded_bytes(*c, tokens, first_position(index), last);
    return n <= count * layer_bytes() ? n : 0;
  }

  caf::expected<size_t> encode_slice(std::span<const std::byte> page, uint32_t first,
                                     uint32_t count, uint32_t index, uint32_t tokens, bool last,
                                     std::span<std::byte> out) const override {
    if (page.size() != page_bytes())
      return make_error(errc::invalid_argument,
                        "a page of " + std::to_string(page.size()) + " bytes for the codec");
    auto c = range_config(first, count);
    if (!c)
      return std::move(c.error());
    const auto range = page.subspan(first * layer_bytes(), count * layer_bytes());
    return codec::encode(*c, {floats(range), tokens, first_position(index), last}, out);
  }

  caf::error decode_slices(std::span<std::byte> page, uint32_t index,
                           std::span<std::byte> scratch) const override {
    if (page.size() != page_bytes() || scratch.size() < page_bytes())
      return make_error(errc::invalid_argument,
                        "a page of " + std::to_string(page.size()) + " bytes for the codec");
    for (uint32_t l = 0; l < cfg_.shape.layers;) {
      const auto at = page.subspan(l * layer_bytes());
      auto info = codec::read_header(at);
      if (!info)
        return std::move(info.error());
      const uint32_t count = info->shape.layers;
      if (count == 0 || count > cfg_.shape.layers - l ||
          info->encoded_bytes > count * layer_bytes())
        return make_error(errc::invalid_argument, "a block of layers [" + std::to_string(l) + ", " +
                                                      std::to_string(l + count) +
                                                      ") that overruns page " +
                                                      std::to_string(index));
      auto c = range_config(l, count);
      if (!c)
        return std::move(c.error());
      auto in = scratch.first(info->encoded_bytes);
      std::memcpy(in.data(), at.data(), in.size());
      if (auto err = decode_with(*c, in, index, at.first(count * layer_bytes())))
        return err;
      l += count;
    }
    return {};
  }

 private:
  uint32_t first_position(uint32_t index) const { return index * cfg_.shape.block_tokens; }
  size_t page_bytes() const { return cfg_.shape.page_floats() * sizeof(float); }
  size_t layer_bytes() const { return page_bytes() / cfg_.shape.layers; }

  caf::error decode_with(const codec::codec_config& c, std::span<const std::byte> block,
                         uint32_t index, std::span<std::byte> page) const {
    auto info = codec::decode(c, block, floats(page));
    if (!info)
      return std::move(info.error());
    if (info->first_position != first_position(index))
      return make_error(errc::invalid_argument, "a block of position " +
                                                    std::to_string(info->first_position) +
                                                    " read as page " + std::to_string(index));
    return {};
  }

  // The codec of layers [first, first + count) alone: KVQuant's with those layers of the
  // calibration (made once per range and kept: a cluster uses a handful of ranges).
  caf::expected<codec::codec_config> range_config(uint32_t first, uint32_t count) const {
    const uint32_t layers = cfg_.shape.layers;
    if (count == 0 || first >= layers || count > layers - first)
      return make_error(errc::invalid_argument, "layers [" + std::to_string(first) + ", " +
                                                    std::to_string(first + count) + ") of " +
                                                    std::to_string(layers));
    if (first == 0 && count == layers)
      return cfg_;
    auto c = cfg_;
    c.shape.layers = count;
    if (!cfg_.calibration)
      return c;
    std::lock_guard guard{mutex_};
    auto& cal = ranges_[{first, count}];
    if (!cal) {
      auto cut = codec::kvquant_layers(*cfg_.calibration, first, count);
      if (!cut)
        return std::move(cut.error());
      cal = std::move(*cut);
    }
    c.calibration = cal;
    return c;
  }

  codec::codec_config cfg_;
  mutable std::mutex mutex_; // workers on threads of their own share one codec
  mutable std::map<std::pair<uint32_t, uint32_t>, std::shared_ptr<const codec::kvquant_calibration>>
      ranges_;
};

// A modeled block: this header, the stand-in slot of its first layer (every slot of a complete
// page holds the same but for its layer), then zeros up to the modeled size. A pool block holds
// all of a page's layers; a hand-off block a range of them.
constexpr uint64_t modeled_block_magic = 0x314b4c424d535243ull; // "CRSMBLK1"
constexpr size_t modeled_header_bytes = 40;
constexpr size_t modeled_block_min_bytes = modeled_header_bytes + standin_layer_bytes;
constexpr size_t modeled_block_align = 8; // the pool arena's unit for codec blocks

struct modeled_header {
  uint8_t kind = 0;
  bool last = false;
  uint32_t tokens = 0;
  uint32_t index = 0;
  uint32_t bytes = 0;
  uint64_t fingerprint = 0;
  uint32_t first = 0; // layers [first, first + count)
  uint32_t count = 0;
};

void write_header(std::byte* out, const modeled_header& h) {
  std::memset(out, 0, modeled_header_bytes);
  std::memcpy(out, &modeled_block_magic, 8);
  out[8] = std::byte{h.kind};
  out[9] = std::byte{h.last ? uint8_t{1} : uint8_t{0}};
  std::memcpy(out + 12, &h.tokens, 4);
  std::memcpy(out + 16, &h.index, 4);
  std::memcpy(out + 20, &h.bytes, 4);
  std::memcpy(out + 24, &h.fingerprint, 8);
  std::memcpy(out + 32, &h.first, 4);
  std::memcpy(out + 36, &h.count, 4);
}

class modeled_codec final : public block_codec {
 public:
  modeled_codec(const model_config& m, codec::kv_shape shape, const block_codec_options& o)
      : m_(m), shape_(shape), o_(o),
        scale_(std::max<uint64_t>(1, m.page_bytes() / standin_page_bytes(m))) {}

  codec::codec_kind kind() const override { return o_.kind; }

  size_t block_bytes(uint32_t index, uint32_t tokens, bool last) const override {
    return bytes_of(o_.kind, 0, m_.layers, index, tokens, last);
  }

  size_t full_block_bytes() const override { return block_bytes(1, m_.block_tokens, false); }

  size_t full_block_model_bytes() const override {
    return codec::encoded_bytes_of(o_.kind, shape_, o_.group_tokens, o_.sink_tokens,
                                   m_.block_tokens, m_.block_tokens, false);
  }

  caf::expected<size_t> encode(std::span<const std::byte> page, uint32_t index, uint32_t tokens,
                               bool last, std::span<std::byte> out) const override {
    return encode_range(page, 0, m_.layers, index, tokens, last, out);
  }

  caf::error decode(std::span<const std::byte> block, uint32_t index,
                    std::span<std::byte> page) const override {
    if (page.size() != standin_page_bytes(m_))
      return make_error(errc::invalid_argument, "a page of " + std::to_string(page.size()) +
                                                    " bytes for the modeled codec");
    auto h = read_block(block, index, 0);
    if (!h)
      return std::move(h.error());
    if (h->count != m_.layers)
      return make_error(errc::invalid_argument, "a modeled block of " + std::to_string(h->count) +
                                                    " layers for a whole page");
    restore(page, block, *h);
    return {};
  }

  size_t slice_bytes(uint32_t first, uint32_t count, uint32_t index, uint32_t tokens,
                     bool last) const override {
    const size_t n = bytes_of(o_.kind, first, count, index, tokens, last);
    return n <= count * standin_layer_bytes ? n : 0;
  }

  caf::expected<size_t> encode_slice(std::span<const std::byte> page, uint32_t first,
                                     uint32_t count, uint32_t index, uint32_t tokens, bool last,
                                     std::span<std::byte> out) const override {
    return encode_range(page, first, count, index, tokens, last, out);
  }

  caf::error decode_slices(std::span<std::byte> page, uint32_t index,
                           std::span<std::byte> scratch) const override {
    if (page.size() != standin_page_bytes(m_) || scratch.size() < page.size())
      return make_error(errc::invalid_argument, "a page of " + std::to_string(page.size()) +
                                                    " bytes for the modeled codec");
    for (uint32_t l = 0; l < m_.layers;) {
      auto at = page.subspan(l * standin_layer_bytes);
      uint64_t magic = 0;
      std::memcpy(&magic, at.data(), 8);
      if (magic == standin_magic) { // a range too small to encode: it came as it is
        const auto s = read_standin(page.data(), l);
        if (s.layer != l || s.fingerprint != m_.fingerprint() || s.page_index != index)
          return make_error(errc::invalid_argument, "layer " + std::to_string(l) + " of page " +
                                                        std::to_string(index) + " is not its KV");
        ++l;
        continue;
      }
      std::memcpy(scratch.data(), at.data(), std::min(at.size(), modeled_header_bytes));
      uint32_t bytes = 0;
      std::memcpy(&bytes, at.data() + 20, 4);
      if (bytes < modeled_block_min_bytes || bytes > at.size())
        return make_error(errc::invalid_argument,
                          "a modeled block that overruns page " + std::to_string(index));
      auto block = scratch.first(bytes);
      std::memcpy(block.data(), at.data(), bytes);
      auto h = read_block(block, index, l);
      if (!h)
        return std::move(h.error());
      restore(page, block, *h);
      l += h->count;
    }
    return {};
  }

 private:
  // The modeled size of a block of layers [first, first + count): the codec's bytes for that
  // much of the model's true page, over the stand-ins' scale, at least a header and a slot.
  size_t bytes_of(codec::codec_kind kind, uint32_t first, uint32_t count, uint32_t index,
                  uint32_t tokens, bool last) const {
    if (count == 0 || first >= m_.layers || count > m_.layers - first)
      return 0;
    auto shape = shape_;
    shape.layers = count;
    const size_t real = codec::encoded_bytes_of(kind, shape, o_.group_tokens, o_.sink_tokens,
                                                tokens, index * m_.block_tokens, last);
    if (real == 0)
      return 0;
    const size_t scaled = (real + scale_ - 1) / scale_;
    const size_t n = std::max(scaled, modeled_block_min_bytes);
    return (n + modeled_block_align - 1) / modeled_block_align * modeled_block_align;
  }

  caf::expected<size_t> encode_range(std::span<const std::byte> page, uint32_t first,
                                     uint32_t count, uint32_t index, uint32_t tokens, bool last,
                                     std::span<std::byte> out) const {
    if (page.size() != standin_page_bytes(m_))
      return make_error(errc::invalid_argument, "a page of " + std::to_string(page.size()) +
                                                    " bytes for the modeled codec");
    const size_t n = bytes_of(o_.kind, first, count, index, tokens, last);
    if (n == 0)
      return make_error(errc::invalid_argument, "block " + std::to_string(index) + " of " +
                                                    std::to_string(tokens) + " tokens");
    if (out.size() < n)
      return make_error(errc::no_space, "a modeled block of " + std::to_string(n) + " bytes");
    if (auto err = check_page(page, first, count, index, tokens))
      return err;
    std::memset(out.data(), 0, n);
    write_header(out.data(), {static_cast<uint8_t>(o_.kind), last, tokens, index,
                              static_cast<uint32_t>(n), m_.fingerprint(), first, count});
    std::memcpy(out.data() + modeled_header_bytes, page.data() + first * standin_layer_bytes,
                standin_layer_bytes);
    return n;
  }

  // Layers [first, first + count) of the page hold page `index` of this model, `tokens` tokens.
  caf::error check_page(std::span<const std::byte> page, uint32_t first, uint32_t count,
                        uint32_t index, uint32_t tokens) const {
    const auto s = read_standin(page.data(), first);
    if (s.magic != standin_magic || s.fingerprint != m_.fingerprint() || s.page_index != index ||
        s.tokens != tokens || s.layer != first)
      return make_error(errc::invalid_argument, "page " + std::to_string(index) +
                                                    " does not hold its " + std::to_string(tokens) +
                                                    " tokens of KV");
    for (uint32_t l = first + 1; l < first + count; ++l) {
      const auto x = read_standin(page.data(), l);
      if (x.layer != l || x.magic != s.magic || x.fingerprint != s.fingerprint ||
          x.content != s.content || x.content_before != s.content_before || x.tokens != s.tokens ||
          x.page_index != s.page_index)
        return make_error(errc::invalid_argument, "layer " + std::to_string(l) + " of page " +
                                                      std::to_string(index) + " is not complete");
    }
    return {};
  }

  // A block of page `index` starting at layer `first`, all of it checked: its size, its padding
  // and its stand-in.
  caf::expected<modeled_header> read_block(std::span<const std::byte> block, uint32_t index,
                                           uint32_t first) const {
    auto bad = [](const std::string& what) {
      return make_error(errc::invalid_argument, "not a modeled block: " + what);
    };
    if (block.size() < modeled_block_min_bytes)
      return bad("too short");
    uint64_t magic = 0;
    std::memcpy(&magic, block.data(), 8);
    if (magic != modeled_block_magic)
      return bad("magic");
    modeled_header h;
    h.kind = static_cast<uint8_t>(block[8]);
    const auto flag = static_cast<uint8_t>(block[9]);
    std::memcpy(&h.tokens, block.data() + 12, 4);
    std::memcpy(&h.index, block.data() + 16, 4);
    std::memcpy(&h.bytes, block.data() + 20, 4);
    std::memcpy(&h.fingerprint, block.data() + 24, 8);
    std::memcpy(&h.first, block.data() + 32, 4);
    std::memcpy(&h.count, block.data() + 36, 4);
    if (h.kind == 0 || h.kind >= codec::codec_kind_count || flag > 1)
      return bad("codec or flags");
    h.last = flag == 1;
    if (h.fingerprint != m_.fingerprint())
      return bad("another model's");
    if (h.index != index || h.first != first)
      return bad("page " + std::to_string(h.index) + " layer " + std::to_string(h.first) +
                 " read as page " + std::to_string(index) + " layer " + std::to_string(first));
    // Sized as the header's codec sizes it: a reader decodes blocks of every codec.
    const auto want = bytes_of(static_cast<codec::codec_kind>(h.kind), h.first, h.count, h.index,
                               h.tokens, h.last);
    if (want == 0 || h.bytes != want || block.size() != want)
      return bad("a size other than its header's");
    // Everything past the slot is padding: a block whose padding changed is not ours.
    if (std::any_of(block.begin() + modeled_block_min_bytes, block.end(),
                    [](std::byte b) { return b != std::byte{}; }))
      return make_error(errc::checksum_mismatch, "a modeled block's padding is not zero");
    const auto s = read_standin(block.data() + modeled_header_bytes, 0);
    if (s.magic != standin_magic || s.fingerprint != m_.fingerprint() || s.page_index != index ||
        s.tokens != h.tokens || s.layer != h.first)
      return bad("its stand-in is not page " + std::to_string(index) + "'s");
    return h;
  }

  // Writes the block's stand-in into the slots of its layers.
  void restore(std::span<std::byte> page, std::span<const std::byte> block,
               const modeled_header& h) const {
    auto s = read_standin(block.data() + modeled_header_bytes, 0);
    for (uint32_t l = h.first; l < h.first + h.count; ++l) {
      s.layer = l;
      write_standin(page.data(), s);
    }
  }

  model_config m_;
  codec::kv_shape shape_;
  block_codec_options o_;
  uint64_t scale_; // true page bytes per stand-in byte, as the modeled links'
};

} // namespace

caf::expected<codec::kv_shape> codec_shape(const model_config& m) {
  codec::kv_shape shape{m.layers, m.kv_heads, m.head_dim(), m.block_tokens};
  codec::codec_config probe;
  probe.kind = codec::codec_kind::int8;
  probe.shape = shape;
  if (auto err = codec::validate(probe))
    return make_error(errc::bad_config, "kv_codec: the model's pages are outside the codecs' "
                                        "limits: " +
                                            describe(err));
  return shape;
}

caf::error check_block_codec(const model_config& m, const block_codec_options& o) {
  if (o.kind == codec::codec_kind::none)
    return {};
  auto shape = codec_shape(m);
  if (!shape)
    return std::move(shape.error());
  if (o.group_tokens < codec::codec_group_tokens_min ||
      o.group_tokens > codec::codec_group_tokens_max || o.group_tokens % 8 != 0)
    return field_error("codec.group_tokens",
                       "must be a multiple of 8 in [" +
                           std::to_string(codec::codec_group_tokens_min) + ", " +
                           std::to_string(codec::codec_group_tokens_max) + "]");
  if (o.sink_tokens > codec::codec_sink_tokens_max)
    return field_error("codec.sink_tokens",
                       "must be at most " + std::to_string(codec::codec_sink_tokens_max));
  if (o.kind != codec::codec_kind::kvquant3 && o.kind != codec::codec_kind::kvquant4)
    return {}; // the calibration run is KVQuant's alone
  if (o.calibration_prompts == 0 || o.calibration_prompts > calibration_prompts_max)
    return field_error("codec.calibration_prompts",
                       "must be in [1, " + std::to_string(calibration_prompts_max) + "]");
  if (o.calibration_prompt_tokens < 2 || o.calibration_prompt_tokens > m.context_tokens_max)
    return field_error("codec.calibration_prompt_tokens",
                       "must be in [2, model.context_tokens_max (" +
                           std::to_string(m.context_tokens_max) + ")]");
  return {};
}

caf::expected<std::vector<std::shared_ptr<const codec::kvquant_calibration>>>
calibrate_reference(const model_config& m, std::span<const uint32_t> bits,
                    const block_codec_options& o) {
  auto checked = o; // the calibration run's fields, checked whatever codec asks for it
  checked.kind = codec::codec_kind::kvquant4;
  if (auto err = check_block_codec(m, checked))
    return err;
  auto shape = codec_shape(m);
  if (!shape)
    return std::move(shape.error());
  ref::model model{m};
  // The prompts as crescent bench kv-codec draws its calibration prompts.
  std::mt19937_64 rng{o.calibration_seed ^ 0x6b7671756e74ull};
  const uint32_t n = o.calibration_prompt_tokens;
  const size_t page_floats = m.page_bytes() / sizeof(float);
  std::vector<std::vector<float>> pages;
  std::vector<codec::calibration_block> blocks;
  std::vector<uint32_t> tokens(n);
  std::vector<ref::token_row> rows;
  pages.reserve(size_t{o.calibration_prompts} * ((n + m.block_tokens - 1) / m.block_tokens));
  for (uint32_t p = 0; p < o.calibration_prompts; ++p) {
    for (auto& t : tokens)
      t = static_cast<uint32_t>(rng() % m.vocab);
    const size_t first_page = pages.size();
    std::vector<std::byte*> ptrs;
    for (uint32_t first = 0; first < n; first += m.block_tokens) {
      pages.emplace_back(page_floats, 0.0f);
      ptrs.push_back(reinterpret_cast<std::byte*>(pages.back().data()));
      blocks.push_back({{}, std::min(m.block_tokens, n - first), first});
    }
    for (size_t first = 0; first < n; first += ref::model::rows_max) {
      rows.clear();
      for (size_t i = first; i < std::min<size_t>(n, first + ref::model::rows_max); ++i)
        rows.push_back({ptrs, static_cast<uint32_t>(i), tokens[i]});
      model.forward(rows);
    }
    for (size_t k = first_page; k < pages.size(); ++k)
      blocks[k].page = pages[k];
  }
  std::vector<std::shared_ptr<const codec::kvquant_calibration>> out;
  for (uint32_t b : bits) {
    codec::calibration_options options;
    options.bits = b;
    options.rope_theta = m.rope_theta;
    options.sink_tokens = o.sink_tokens;
    options.positions_max = m.context_tokens_max;
    auto cal = codec::calibrate_kvquant(*shape, options, blocks);
    if (!cal)
      return std::move(cal.error());
    out.push_back(std::move(*cal));
  }
  return out;
}

caf::expected<std::shared_ptr<const block_codec>>
make_reference_codec(const model_config& m, const block_codec_options& o) {
  if (o.kind == codec::codec_kind::none)
    return make_error(errc::invalid_argument, "kv_codec none stores pages as they are");
  if (auto err = check_block_codec(m, o))
    return err;
  if (m.kv_element_bytes != 4)
    return make_error(errc::bad_config, "kv_codec: the reference engine's codecs read float32 "
                                        "pages (model.kv_element_bytes 4)");
  codec::codec_config cfg;
  cfg.kind = o.kind;
  cfg.shape = *codec_shape(m);
  cfg.group_tokens = o.group_tokens;
  if (o.kind == codec::codec_kind::kvquant3 || o.kind == codec::codec_kind::kvquant4) {
    const uint32_t bits[] = {codec::codec_bits(o.kind)};
    auto cal = calibrate_reference(m, bits, o);
    if (!cal)
      return std::move(cal.error());
    cfg.calibration = cal->front();
  }
  if (auto err = codec::validate(cfg))
    return make_error(errc::bad_config, "kv_codec: " + describe(err));
  return std::shared_ptr<const block_codec>{std::make_shared<reference_codec>(std::move(cfg))};
}

caf::expected<std::shared_ptr<const block_codec>> make_modeled_codec(const model_config& m,
                                                                     const block_codec_options& o) {
  if (o.kind == codec::codec_kind::none)
    return make_error(errc::invalid_argument, "kv_codec none stores pages as they are");
  if (auto err = check_block_codec(m, o))
    return err;
  return std::shared_ptr<const block_codec>{std::make_shared<modeled_codec>(m, *codec_shape(m), o)};
}

} // namespace crescent::gpu
