#include "gpu/modeled_engine.hpp"

#include "gpu/sequence_checks.hpp"
#include "messages/errors.hpp"

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

class modeled_engine final : public engine {
 public:
  modeled_engine(const model_config& cfg, std::shared_ptr<const modeled_profile> profile,
                 std::shared_ptr<shared_cores> cores)
      : cfg_(cfg), profile_(std::move(profile)), cores_(std::move(cores)),
        fingerprint_(cfg.fingerprint()), kv_bytes_per_token_(cfg.kv_bytes_per_token()) {}

  const model_config& config() const override { return cfg_; }
  uint64_t page_memory_bytes() const override { return standin_page_bytes; }

  caf::expected<prefill_result> prefill(const sequence_ref& seq,
                                        std::span<const uint32_t> tokens) override {
    if (auto err = check_sequence(cfg_, seq, tokens, prefill_call, 1))
      return err;
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto c = write(seq.pages, static_cast<uint32_t>(seq.length_tokens + i), tokens[i]);
      if (!c)
        return make_error(errc::invalid_argument, "prefill: " + describe(c.error()));
    }
    prefill_result r;
    r.next_token = greedy(seq.pages, seq.length_tokens + static_cast<uint32_t>(tokens.size()) - 1);
    r.compute_ns = on_cores(modeled_prefill_ns(*profile_, seq.length_tokens, tokens.size()));
    return r;
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
      if (auto err = check_writable(seqs[i].pages, seqs[i].length_tokens))
        return make_error(errc::invalid_argument,
                          "decode: sequence " + to_string(i) + ": " + describe(err));
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      [[maybe_unused]] auto written = write(seqs[i].pages, seqs[i].length_tokens, tokens[i]);
      r.next_tokens.push_back(greedy(seqs[i].pages, seqs[i].length_tokens));
    }
    r.compute_ns = on_cores(modeled_decode_ns(*profile_, contexts, kv_bytes_per_token_));
    return r;
  }

 private:
  uint64_t on_cores(uint64_t compute_ns) const {
    return cores_ ? cores_->reserve(compute_ns) : compute_ns;
  }

  // The token after position `last`: drawn from every page of the sequence up to it, as
  // attention reads them all, so that any page that is not what it should be changes it.
  uint32_t greedy(std::span<std::byte* const> pages, uint32_t last) const {
    uint64_t digest = 0x4e455854544f4bull;
    for (uint32_t p = 0; p <= last / cfg_.block_tokens; ++p)
      digest = mix(digest ^ read_standin(pages[p]).content);
    return static_cast<uint32_t>(digest % cfg_.vocab);
  }

  bool holds_sequence(const standin_page& s, uint32_t page) const {
    return s.magic == standin_magic && s.fingerprint == fingerprint_ && s.page_index == page &&
           s.tokens <= cfg_.block_tokens;
  }

  // Whether position `pos` can be written: everything before it is there (see the header).
  caf::error check_writable(std::span<std::byte* const> pages, uint32_t pos) const {
    const uint32_t page = pos / cfg_.block_tokens;
    const uint32_t offset = pos % cfg_.block_tokens;
    if (offset == 0) {
      if (page == 0)
        return {};
      auto before = read_standin(pages[page - 1]);
      if (!holds_sequence(before, page - 1) || before.tokens != cfg_.block_tokens)
        return make_error(errc::invalid_argument,
                          "page " + to_string(page - 1) + " does not hold the KV of positions " +
                              to_string(pos - cfg_.block_tokens) + " to " + to_string(pos - 1));
      return {};
    }
    auto s = read_standin(pages[page]);
    if (!holds_sequence(s, page) || s.tokens < offset)
      return make_error(errc::invalid_argument,
                        "no KV for position " + to_string(pos - 1) + " in page " + to_string(page) +
                            " (it holds " + to_string(holds_sequence(s, page) ? s.tokens : 0) +
                            " tokens)");
    if (s.tokens > offset + 1)
      return make_error(errc::invalid_argument,
                        "position " + to_string(pos) + " lies below the last one page " +
                            to_string(page) + " holds; the modeled engine rewrites only that");
    return {};
  }

  // Writes `token` at `pos`; returns the page's content after it.
  caf::expected<uint64_t> write(std::span<std::byte* const> pages, uint32_t pos, uint32_t token) {
    if (auto err = check_writable(pages, pos))
      return err;
    const uint32_t page = pos / cfg_.block_tokens;
    const uint32_t offset = pos % cfg_.block_tokens;
    standin_page s;
    if (offset == 0) {
      s.magic = standin_magic;
      s.fingerprint = fingerprint_;
      s.page_index = page;
      s.content_before =
          page == 0 ? chain_root(fingerprint_) : read_standin(pages[page - 1]).content;
      s.tokens = 1;
    } else {
      s = read_standin(pages[page]);
      if (s.tokens == offset) { // appending
        s.content_before = s.content;
        s.tokens += 1;
      } // else rewriting the last position, from the content before it
    }
    s.content = extend(s.content_before, token, pos);
    write_standin(pages[page], s);
    return s.content;
  }

  model_config cfg_;
  std::shared_ptr<const modeled_profile> profile_;
  std::shared_ptr<shared_cores> cores_;
  uint64_t fingerprint_;
  uint64_t kv_bytes_per_token_;
};

} // namespace

standin_page read_standin(const std::byte* page) {
  standin_page s;
  std::memcpy(&s.magic, page, 8);
  std::memcpy(&s.fingerprint, page + 8, 8);
  std::memcpy(&s.content, page + 16, 8);
  std::memcpy(&s.content_before, page + 24, 8);
  std::memcpy(&s.tokens, page + 32, 4);
  std::memcpy(&s.page_index, page + 36, 4);
  return s;
}

void write_standin(std::byte* page, const standin_page& s) {
  std::memset(page, 0, standin_page_bytes);
  std::memcpy(page, &s.magic, 8);
  std::memcpy(page + 8, &s.fingerprint, 8);
  std::memcpy(page + 16, &s.content, 8);
  std::memcpy(page + 24, &s.content_before, 8);
  std::memcpy(page + 32, &s.tokens, 4);
  std::memcpy(page + 36, &s.page_index, 4);
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
