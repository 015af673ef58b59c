#include "gpu/modeled_engine.hpp"

#include "gpu/sequence_checks.hpp"
#include "messages/errors.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace crescent::gpu {

namespace {

using std::to_string;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The content after writing `token` at `position` onto content `before`.
uint64_t extend(uint64_t before, uint32_t token, uint32_t position) {
  return mix(before ^ mix((uint64_t{position} << 32) | token));
}

// Where a sequence's chain starts: the model, so that two models never agree.
uint64_t chain_root(uint64_t fingerprint) {
  return mix(fingerprint ^ 0x5354414e44494e53ull);
}

// What the stream stand-in holds: the chunk (a digest of its tokens and positions) and the
// layer the next range starts at.
constexpr size_t stream_standin_bytes = 16;

// A chunk's tokens and where they start. XXH3, not the chain: each of a chunk's layer ranges
// checks its stream, and a chain over its tokens per range was a tenth of a replay's time.
uint64_t chunk_digest(uint32_t first_position, std::span<const uint32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(),
                              mix(0x53545245414dull ^ first_position));
}

// What writing a run of tokens into a page made of the state it started from. Every layer
// range of a chunk writes the same tokens from the same state (each range's slots hold what
// the range before it held), so the chain over a page's tokens is computed once per chunk, not
// once per range. The state and positions are compared whole; only the tokens by digest.
struct page_write {
  uint64_t content = 0, content_before = 0; // the state written from
  uint32_t tokens = 0, position = 0, count = 0;
  uint64_t tokens_digest = 0;
  uint64_t new_content = 0, new_content_before = 0; // what the run made of it
  uint32_t new_tokens = 0;
  bool valid = false;

  bool same_start(const page_write& o) const {
    return valid && content == o.content && content_before == o.content_before &&
           tokens == o.tokens && position == o.position && count == o.count &&
           tokens_digest == o.tokens_digest;
  }
};

// Runs shorter than this (a decode step's one token) are chained directly.
constexpr uint32_t page_write_memo_tokens_min = 16;
constexpr size_t page_write_memo_slots = 64; // pages of a chunk: chunk_tokens / block_tokens + 1

class modeled_engine final : public engine {
 public:
  modeled_engine(const model_config& cfg, std::shared_ptr<const modeled_profile> profile,
                 std::shared_ptr<shared_cores> cores)
      : cfg_(cfg), profile_(std::move(profile)), cores_(std::move(cores)),
        fingerprint_(cfg.fingerprint()), kv_bytes_per_token_(cfg.kv_bytes_per_token()) {}

  const model_config& config() const override { return cfg_; }
  uint64_t page_memory_bytes() const override { return standin_page_bytes(cfg_); }
  // The stand-in's header, then zeros standing for the chunk's activations (bf16, d_model a
  // token) at the modeled links' scale (a page's bytes over its stand-in's): so that a stream
  // sent between the stages of a prefill group is timed for its true size.
  size_t stream_bytes(uint32_t tokens) const override {
    const uint64_t scale = std::max<uint64_t>(1, cfg_.page_bytes() / standin_page_bytes(cfg_));
    const uint64_t modeled = uint64_t{tokens} * cfg_.d_model * 2;
    return stream_standin_bytes + ((modeled + scale - 1) / scale + 7) / 8 * 8;
  }

  caf::expected<prefill_result> prefill(const sequence_ref& seq,
                                        std::span<const uint32_t> tokens) override {
    return run_prefill(seq, tokens, all_layers(), {});
  }

  caf::expected<prefill_result> prefill_layers(const sequence_ref& seq,
                                               std::span<const uint32_t> tokens, layer_range r,
                                               std::span<std::byte> stream) override {
    if (auto err = check_layers(cfg_, r, stream, stream_standin_bytes, 1))
      return err;
    return run_prefill(seq, tokens, r, stream);
  }

  caf::expected<decode_result> decode(std::span<const sequence_ref> seqs,
                                      std::span<const uint32_t> tokens) override {
    if (auto err = check_batch(seqs, tokens))
      return err;
    std::vector<uint32_t> contexts;
    contexts.reserve(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (auto err = check_sequence(cfg_, seqs[i], tokens.subspan(i, 1), i, 1))
        return err;
      contexts.push_back(seqs[i].length_tokens);
    }
    decode_result r;
    r.next_tokens.reserve(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      // Checked first, so that a bad sequence leaves the others' pages as they were.
      if (auto s = writable(seqs[i].pages, seqs[i].length_tokens, all_layers()); !s)
        return make_error(errc::invalid_argument,
                          "decode: sequence " + to_string(i) + ": " + describe(s.error()));
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      [[maybe_unused]] auto written =
          write(seqs[i].pages, seqs[i].length_tokens, tokens.subspan(i, 1), all_layers());
      r.next_tokens.push_back(greedy(seqs[i].pages, seqs[i].length_tokens));
    }
    r.compute_ns = on_cores(modeled_decode_ns(*profile_, contexts, kv_bytes_per_token_),
                            profile_->decode_warmup_ns);
    return r;
  }

 private:
  layer_range all_layers() const { return {0, cfg_.layers}; }

  // A call's time on the shared cores, with its warm-up after the time this instance computed
  // nothing (`warmup`: the profile's curve for this kind of call; empty: none).
  uint64_t on_cores(uint64_t compute_ns, const std::vector<double>& warmup) {
    if (!cores_)
      return compute_ns;
    const int64_t now = cores_->now();
    const uint64_t extra = warmup_extra_ns(profile_->warmup_idle_ms, warmup, now - last_end_ns_);
    const uint64_t duration = cores_->reserve(compute_ns + extra);
    last_end_ns_ = now + static_cast<int64_t>(duration);
    return duration;
  }

  caf::expected<prefill_result> run_prefill(const sequence_ref& seq,
                                            std::span<const uint32_t> tokens, layer_range r,
                                            std::span<std::byte> stream) {
    if (auto err = check_sequence(cfg_, seq, tokens, prefill_call, 1))
      return err;
    const bool streamed = !stream.empty();
    const uint64_t chunk = streamed ? chunk_digest(seq.length_tokens, tokens) : 0;
    if (streamed && r.first > 0) {
      uint64_t digest = 0;
      uint32_t layer = 0;
      std::memcpy(&digest, stream.data(), 8);
      std::memcpy(&layer, stream.data() + 8, 4);
      if (digest != chunk || layer != r.first)
        return make_error(errc::invalid_argument,
                          "prefill: the stream does not hold this chunk after layer " +
                              to_string(r.first - 1));
    }
    for (uint32_t pos = seq.length_tokens, i = 0; i < tokens.size();) {
      // The tokens of this call that fall in pos's page.
      const uint32_t room = cfg_.block_tokens - pos % cfg_.block_tokens;
      const auto n = static_cast<uint32_t>(std::min<size_t>(room, tokens.size() - i));
      if (auto err = write(seq.pages, pos, tokens.subspan(i, n), r))
        return make_error(errc::invalid_argument, "prefill: " + describe(err));
      pos += n;
      i += n;
    }
    if (streamed) {
      std::memcpy(stream.data(), &chunk, 8);
      std::memcpy(stream.data() + 8, &r.end, 4);
    }
    prefill_result out;
    const auto last = seq.length_tokens + static_cast<uint32_t>(tokens.size()) - 1;
    if (r.end == cfg_.layers)
      out.next_token = greedy(seq.pages, last);
    out.compute_ns = on_cores(modeled_prefill_layers_ns(*profile_, seq.length_tokens, tokens.size(),
                                                        r.count(), r.first == 0),
                              profile_->prefill_warmup_ns);
    return out;
  }

  // The token after position `last`: drawn from every page of the sequence up to it, as
  // attention reads them all, so that any page that is not what it should be changes it. Each
  // page's last layer stands for it: the checksums verify every slot that moved.
  uint32_t greedy(std::span<std::byte* const> pages, uint32_t last) const {
    uint64_t digest = 0x4e455854544f4bull;
    for (uint32_t p = 0; p <= last / cfg_.block_tokens; ++p)
      digest = mix(digest ^ read_standin(pages[p], cfg_.layers - 1).content);
    return static_cast<uint32_t>(digest % cfg_.vocab);
  }

  bool holds_sequence(const standin_page& s, uint32_t page) const {
    return s.magic == standin_magic && s.fingerprint == fingerprint_ && s.page_index == page &&
           s.tokens <= cfg_.block_tokens;
  }

  // The page's slots of layers r, which must agree; an error names the first slot that does
  // not (a layer that was not written or did not arrive).
  caf::expected<standin_page> slots(std::span<std::byte* const> pages, uint32_t page,
                                    layer_range r) const {
    auto s = read_standin(pages[page], r.first);
    if (s.magic != standin_magic)
      return s; // no KV at all: the caller says which positions are missing
    for (uint32_t l = r.first + 1; l < r.end; ++l) {
      auto x = read_standin(pages[page], l);
      if (x.layer != l || x.magic != s.magic || x.fingerprint != s.fingerprint ||
          x.content != s.content || x.content_before != s.content_before || x.tokens != s.tokens ||
          x.page_index != s.page_index)
        return make_error(errc::invalid_argument,
                          "layer " + to_string(l) + " of page " + to_string(page) +
                              " does not hold what layer " + to_string(r.first) + " holds");
    }
    return s;
  }

  // The state of pos's page that writing position `pos` in layers r starts from, when
  // everything before pos is there (see the header).
  caf::expected<standin_page> writable(std::span<std::byte* const> pages, uint32_t pos,
                                       layer_range r) const {
    const uint32_t page = pos / cfg_.block_tokens;
    const uint32_t offset = pos % cfg_.block_tokens;
    if (offset == 0) {
      standin_page s;
      s.magic = standin_magic;
      s.fingerprint = fingerprint_;
      s.page_index = page;
      if (page == 0) {
        s.content_before = chain_root(fingerprint_);
        return s;
      }
      auto before = slots(pages, page - 1, r);
      if (!before)
        return before.error();
      if (!holds_sequence(*before, page - 1) || before->tokens != cfg_.block_tokens)
        return make_error(errc::invalid_argument,
                          "page " + to_string(page - 1) + " does not hold the KV of positions " +
                              to_string(pos - cfg_.block_tokens) + " to " + to_string(pos - 1));
      s.content_before = before->content;
      return s;
    }
    auto s = slots(pages, page, r);
    if (!s)
      return s.error();
    if (!holds_sequence(*s, page) || s->tokens < offset)
      return make_error(errc::invalid_argument,
                        "no KV for position " + to_string(pos - 1) + " in page " + to_string(page) +
                            " (it holds " + to_string(holds_sequence(*s, page) ? s->tokens : 0) +
                            " tokens)");
    if (s->tokens > offset + 1)
      return make_error(errc::invalid_argument,
                        "position " + to_string(pos) + " lies below the last one page " +
                            to_string(page) + " holds; the modeled engine rewrites only that");
    return s;
  }

  // Writes `tokens` (all within pos's page) from `pos` into layers r of that page.
  caf::error write(std::span<std::byte* const> pages, uint32_t pos,
                   std::span<const uint32_t> tokens, layer_range r) {
    auto s = writable(pages, pos, r);
    if (!s)
      return s.error();
    const uint32_t offset = pos % cfg_.block_tokens;
    if (tokens.size() < page_write_memo_tokens_min) {
      chain(*s, offset, pos, tokens);
    } else {
      page_write w;
      w.content = s->content;
      w.content_before = s->content_before;
      w.tokens = s->tokens;
      w.position = pos;
      w.count = static_cast<uint32_t>(tokens.size());
      w.tokens_digest = XXH3_64bits(tokens.data(), tokens.size_bytes());
      auto& memo = memo_[(pos / cfg_.block_tokens) % memo_.size()];
      if (!memo.same_start(w)) {
        chain(*s, offset, pos, tokens);
        w.new_content = s->content;
        w.new_content_before = s->content_before;
        w.new_tokens = s->tokens;
        w.valid = true;
        memo = w;
      }
      s->content = memo.new_content;
      s->content_before = memo.new_content_before;
      s->tokens = memo.new_tokens;
    }
    for (uint32_t l = r.first; l < r.end; ++l) {
      s->layer = l;
      write_standin(pages[pos / cfg_.block_tokens], *s);
    }
    return {};
  }

  // Chains `tokens`, written from `pos` (at `offset` in its page), onto the page state `s`.
  static void chain(standin_page& s, uint32_t offset, uint32_t pos,
                    std::span<const uint32_t> tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto at = static_cast<uint32_t>(offset + i);
      if (s.tokens == at) { // appending
        s.content_before = at == 0 ? s.content_before : s.content;
        s.tokens += 1;
      } // else rewriting the last position, from the content before it
      s.content = extend(s.content_before, tokens[i], pos + static_cast<uint32_t>(i));
    }
  }

  model_config cfg_;
  std::shared_ptr<const modeled_profile> profile_;
  std::shared_ptr<shared_cores> cores_;
  int64_t last_end_ns_ = 0; // when this instance's last call ended (the run starts idle)
  uint64_t fingerprint_;
  uint64_t kv_bytes_per_token_;
  std::array<page_write, page_write_memo_slots> memo_{}; // by page index
};

} // namespace

standin_page read_standin(const std::byte* page, uint32_t layer) {
  page += size_t{layer} * standin_layer_bytes;
  standin_page s;
  std::memcpy(&s.magic, page, 8);
  std::memcpy(&s.fingerprint, page + 8, 8);
  std::memcpy(&s.content, page + 16, 8);
  std::memcpy(&s.content_before, page + 24, 8);
  std::memcpy(&s.tokens, page + 32, 4);
  std::memcpy(&s.page_index, page + 36, 4);
  std::memcpy(&s.layer, page + 40, 4);
  return s;
}

void write_standin(std::byte* page, const standin_page& s) {
  page += size_t{s.layer} * standin_layer_bytes;
  std::memset(page, 0, standin_layer_bytes);
  std::memcpy(page, &s.magic, 8);
  std::memcpy(page + 8, &s.fingerprint, 8);
  std::memcpy(page + 16, &s.content, 8);
  std::memcpy(page + 24, &s.content_before, 8);
  std::memcpy(page + 32, &s.tokens, 4);
  std::memcpy(page + 36, &s.page_index, 4);
  std::memcpy(page + 40, &s.layer, 4);
}

caf::expected<std::unique_ptr<engine>>
make_modeled_engine(const model_config& cfg, std::shared_ptr<const modeled_profile> profile,
                    std::shared_ptr<shared_cores> cores) {
  if (auto err = validate(cfg))
    return err;
  if (!profile)
    return make_error(errc::bad_config, "the modeled engine needs a profile (engine.profile)");
  if (auto err = validate(*profile))
    return err;
  if (auto err = check_model(*profile, cfg))
    return err;
  if (profile->shared_cores > 0 && !cores)
    return make_error(errc::bad_config, "profile " + profile->name + " shares " +
                                            to_string(profile->shared_cores) +
                                            " cores among its instances: they need them");
  return std::unique_ptr<engine>{
      std::make_unique<modeled_engine>(cfg, std::move(profile), std::move(cores))};
}

} // namespace crescent::gpu
