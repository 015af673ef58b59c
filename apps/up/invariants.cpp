#include "apps/up/invariants.hpp"

#include "gpu/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace crescent::up {

std::vector<uint32_t> reference_tokens(const gpu::model_config& model,
                                       const std::vector<uint32_t>& prompt,
                                       uint32_t max_new_tokens) {
  gpu::engine_options options;
  options.timing = gpu::timing_mode::modeled; // nothing here is timed
  auto engine = gpu::make_reference_engine(model, options);
  if (!engine || prompt.empty() || max_new_tokens == 0)
    return {};
  const size_t pages =
      (prompt.size() + max_new_tokens + model.block_tokens - 1) / model.block_tokens;
  std::vector<std::byte> memory(pages * model.page_bytes());
  std::vector<std::byte*> ptrs;
  for (size_t i = 0; i < pages; ++i)
    ptrs.push_back(memory.data() + i * model.page_bytes());
  auto first = (*engine)->prefill({ptrs, 0}, prompt);
  if (!first)
    return {};
  std::vector<uint32_t> out{first->next_token};
  auto length = static_cast<uint32_t>(prompt.size());
  while (out.size() < max_new_tokens) {
    gpu::sequence_ref seq{ptrs, length};
    uint32_t input = out.back();
    auto step = (*engine)->decode(std::span{&seq, 1}, std::span{&input, 1});
    if (!step)
      return {};
    out.push_back(step->next_tokens.at(0));
    ++length;
  }
  return out;
}

namespace {

// Where two token sequences part: what a reader needs to tell a lost or reordered batch (a
// shift) from a wrong computation (one value, then drift).
std::string first_difference(const std::vector<uint32_t>& got,
                             const std::vector<uint32_t>& expected) {
  const auto [g, e] = std::mismatch(got.begin(), got.end(), expected.begin(), expected.end());
  const auto at = static_cast<size_t>(g - got.begin());
  auto text = fmt::format("{} tokens against {}; the first difference at output index {}",
                          got.size(), expected.size(), at);
  if (g != got.end() && e != expected.end())
    text += fmt::format(" ({} against {})", *g, *e);
  return text;
}

} // namespace

invariant_report check_invariants(const cluster_config& cfg,
                                  const std::vector<replay::synthetic_request>& requests,
                                  const std::vector<replay::request_result>& results,
                                  reference_cache* cache) {
  invariant_report r;
  r.requests = requests.size();
  if (cfg.codec.kind != storage::codec::codec_kind::none)
    r.tokens_unchecked = fmt::format("kv_codec {} quantizes the KV that prefill reuses and "
                                     "decode reads",
                                     storage::codec::to_string(cfg.codec.kind));
  auto violate = [&](uint64_t id, std::string what) {
    if (r.violations.size() < violations_listed_max) {
      r.violations.push_back(std::move(what));
      if (std::find(r.requests_violated.begin(), r.requests_violated.end(), id) ==
          r.requests_violated.end())
        r.requests_violated.push_back(id);
    } else if (r.violations.size() == violations_listed_max) {
      r.violations.push_back("and more");
    }
  };
  std::map<uint64_t, const replay::request_result*> outcome;
  for (const auto& x : results)
    if (!outcome.emplace(x.id, &x).second)
      violate(x.id, fmt::format("request {} ended twice", x.id));
  for (const auto& q : requests) {
    auto i = outcome.find(q.id);
    if (i == outcome.end()) {
      violate(q.id, fmt::format("request {} never ended", q.id));
      continue;
    }
    ++r.ended;
    const auto& x = *i->second;
    if (x.status == replay::outcome_status::failed && x.reason.empty())
      violate(q.id, fmt::format("request {} failed without a reason", q.id));
    if (x.status != replay::outcome_status::completed || !r.tokens_unchecked.empty())
      continue;
    ++r.tokens_checked;
    std::vector<uint32_t> computed;
    const std::vector<uint32_t>* expected = &computed;
    if (cache != nullptr) {
      auto [at, fresh] = cache->try_emplace(q.id);
      if (fresh)
        at->second = reference_tokens(cfg.model, q.tokens, q.max_new_tokens);
      expected = &at->second;
    } else {
      computed = reference_tokens(cfg.model, q.tokens, q.max_new_tokens);
    }
    if (x.tokens != *expected && ++r.tokens_wrong)
      violate(q.id,
              fmt::format("request {} completed with other tokens than the reference engine's: {}",
                          q.id, first_difference(x.tokens, *expected)));
  }
  return r;
}

std::string format_invariants(const invariant_report& r) {
  std::string out = fmt::format(
      "invariants    {}: {} of {} requests ended with one outcome; {} completed ones decoded the "
      "reference engine's tokens\n",
      r.held() ? "held" : "VIOLATED", r.ended, r.requests, r.tokens_checked - r.tokens_wrong);
  if (!r.tokens_unchecked.empty())
    out += "              tokens not compared with the reference engine's: " + r.tokens_unchecked +
           "\n";
  for (const auto& v : r.violations)
    out += "  violation   " + v + "\n";
  return out;
}

} // namespace crescent::up
