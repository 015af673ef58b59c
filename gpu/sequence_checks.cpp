#include "gpu/sequence_checks.hpp"

#include "messages/errors.hpp"

#include <cmath>
#include <string>

namespace crescent::gpu {

namespace {

using std::to_string;

/// How an error sentence starts: "prefill" or "decode: sequence 3". Built only on errors, so
/// that a successful call allocates nothing.
std::string who(size_t seq_index) {
  return seq_index == prefill_call ? "prefill" : "decode: sequence " + to_string(seq_index);
}

} // namespace

caf::error check_sequence(const model_config& cfg, const sequence_ref& seq,
                          std::span<const uint32_t> tokens, size_t seq_index,
                          size_t page_alignment) {
  if (tokens.empty())
    return make_error(errc::invalid_argument, who(seq_index) + ": no tokens to compute");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= cfg.vocab)
      return make_error(errc::invalid_argument, who(seq_index) + ": token " + to_string(i) +
                                                    " has id " + to_string(tokens[i]) +
                                                    ", not below model.vocab (" +
                                                    to_string(cfg.vocab) + ")");
  const uint64_t end = uint64_t{seq.length_tokens} + tokens.size();
  if (end > cfg.context_tokens_max)
    return make_error(errc::limit_exceeded, who(seq_index) + ": the sequence would grow to " +
                                                to_string(end) +
                                                " tokens, above model.context_tokens_max (" +
                                                to_string(cfg.context_tokens_max) + ")");
  if (uint64_t{seq.pages.size()} * cfg.block_tokens < end)
    return make_error(errc::out_of_range,
                      who(seq_index) + ": " + to_string(seq.pages.size()) + " pages hold " +
                          to_string(uint64_t{seq.pages.size()} * cfg.block_tokens) +
                          " tokens, fewer than the " + to_string(end) + " needed");
  // Only pages that are read or written must be usable.
  const uint64_t used = (end + cfg.block_tokens - 1) / cfg.block_tokens;
  for (uint64_t p = 0; p < used; ++p) {
    if (seq.pages[p] == nullptr)
      return make_error(errc::invalid_argument,
                        who(seq_index) + ": page " + to_string(p) + " is null");
    if (reinterpret_cast<uintptr_t>(seq.pages[p]) % page_alignment != 0)
      return make_error(errc::invalid_argument, who(seq_index) + ": page " + to_string(p) +
                                                    " is not aligned to " +
                                                    to_string(page_alignment) + " bytes");
  }
  return {};
}

caf::error check_batch(std::span<const sequence_ref> seqs, std::span<const uint32_t> tokens) {
  if (seqs.empty() || seqs.size() != tokens.size())
    return make_error(errc::invalid_argument,
                      "decode: " + to_string(seqs.size()) + " sequences and " +
                          to_string(tokens.size()) +
                          " tokens; need one token per sequence and at least one");
  return {};
}

caf::error check_layers(const model_config& cfg, layer_range r, std::span<const std::byte> stream,
                        size_t stream_bytes, size_t alignment) {
  if (r.first >= r.end || r.end > cfg.layers)
    return make_error(errc::invalid_argument, "prefill: layers [" + to_string(r.first) + ", " +
                                                  to_string(r.end) + ") are not a range of the " +
                                                  to_string(cfg.layers) + " layers");
  if (r.first == 0 && r.end == cfg.layers && stream.empty())
    return {}; // the whole model: no stream in or out
  if (stream.size() < stream_bytes)
    return make_error(errc::invalid_argument, "prefill: a stream of " + to_string(stream.size()) +
                                                  " bytes; the chunk's is " +
                                                  to_string(stream_bytes));
  if (reinterpret_cast<uintptr_t>(stream.data()) % alignment != 0)
    return make_error(errc::invalid_argument,
                      "prefill: the stream is not aligned to " + to_string(alignment) + " bytes");
  return {};
}

caf::expected<double> check_decode(const model_config& cfg, std::span<const sequence_ref> seqs,
                                   std::span<const uint32_t> tokens, size_t page_alignment) {
  if (auto err = check_batch(seqs, tokens))
    return err;
  double flops = 0.0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (auto err = check_sequence(cfg, seqs[i], tokens.subspan(i, 1), i, page_alignment))
      return err;
    flops += model_flops(cfg, seqs[i].length_tokens, 1);
  }
  return flops;
}

caf::error check_timing(const engine_options& options) {
  if (!std::isfinite(options.modeled_flops_per_s) || options.modeled_flops_per_s <= 0.0)
    return make_error(errc::bad_config, "engine modeled_flops_per_s (" +
                                            to_string(options.modeled_flops_per_s) +
                                            ") must be finite and positive");
  return {};
}

uint64_t call_cost_ns(const engine_options& options, std::chrono::steady_clock::time_point start,
                      double flops) {
  if (options.timing == timing_mode::modeled)
    return static_cast<uint64_t>(std::ceil(flops / options.modeled_flops_per_s * 1e9));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
}

} // namespace crescent::gpu
