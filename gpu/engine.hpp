// The compute-engine contract: prefill a chunk of tokens onto paged KV, decode one step for a
// batch, greedy sampling. Engines are synchronous and not thread-safe: one per worker actor.
//
// KV lives in pages owned by the caller (registered memory of the worker, so the transfer
// engine can move it without copies through mailboxes). Page p of a sequence holds tokens
// [p * block_tokens, (p + 1) * block_tokens) in the layout of model_config::page_bytes.
//
// Determinism contract (the reference engine): the KV bytes and logits computed for a token
// depend only on the model, the token ids and the KV bytes of the tokens before it, never on
// how the work was chunked or batched. So a prompt prefilled in chunks after loading a cached
// prefix decodes exactly the tokens of one monolithic prefill.
#pragma once

#include "gpu/model_config.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace crescent::gpu {

/// A sequence's KV as the engine sees it: its pages and how many tokens they already hold.
struct sequence_ref {
  std::span<std::byte* const> pages;
  uint32_t length_tokens = 0;
};

/// Layers [first, end) of the model: one step of layer-wise KV streaming, or the stage of a
/// prefill pipeline that holds them.
struct layer_range {
  uint32_t first = 0;
  uint32_t end = 0;
  uint32_t count() const { return end - first; }
};

/// Bytes [offset, offset + length) of a page.
struct page_slice {
  size_t offset = 0;
  size_t length = 0;
};

struct prefill_result {
  uint32_t next_token = 0; // greedy token after the last prefilled one
  uint64_t compute_ns = 0; // what this call costs (measured or modeled, see timing_mode)
};

struct decode_result {
  std::vector<uint32_t> next_tokens; // one per sequence, in input order
  uint64_t compute_ns = 0;
};

enum class timing_mode {
  measured, // wall time of the call on this machine
  modeled,  // flops / modeled_flops_per_s: deterministic, for simulated time and tests
};

enum class engine_kind {
  reference, // the reference model's arithmetic on the CPU, KV bytes real
  modeled,   // no arithmetic: time from a profile, KV pages as stand-ins (modeled_engine.hpp)
  cuda,      // the reference model on a CUDA device, KV bytes the reference's
             // (cuda/device_engine.hpp)
};

struct modeled_profile;

/// The largest CUDA device index a cluster file or command may name.
inline constexpr uint32_t cuda_device_index_max = 63;

struct engine_options {
  engine_kind kind = engine_kind::reference;
  timing_mode timing = timing_mode::measured; // the reference engine's
  double modeled_flops_per_s = 20e9;          // the reference engine's, with modeled timing
  // The modeled engine's profile, as named by the cluster file's engine.profile (a built-in
  // profile or a file): required for engine_kind::modeled, unused otherwise.
  std::string profile_name;
  std::shared_ptr<const modeled_profile> profile;
  int device = 0; // the cuda engine's CUDA device
};

class engine {
 public:
  virtual ~engine() = default;

  virtual const model_config& config() const = 0;

  /// Bytes of one KV page in the memory this engine computes on: the pages callers allocate,
  /// move and store. The reference engine's pages hold the real KV (config().page_bytes());
  /// the modeled engine's hold a small stand-in of a page of config().page_bytes().
  virtual uint64_t page_memory_bytes() const { return config().page_bytes(); }

  /// Computes tokens at positions [seq.length_tokens, seq.length_tokens + tokens.size()),
  /// writing their K and V into seq's pages. Errors (nothing written that matters): empty
  /// chunk, a token id >= vocab, too few pages, context limit exceeded.
  virtual caf::expected<prefill_result> prefill(const sequence_ref& seq,
                                                std::span<const uint32_t> tokens) = 0;

  /// Bytes of the stream prefill_layers hands from one range of layers to the next, for a
  /// chunk of `tokens` tokens: the residual stream of the reference engine (float32, d_model a
  /// token), a small stand-in for the modeled engine.
  virtual size_t stream_bytes(uint32_t tokens) const = 0;

  /// Where layers `r` lie in every page: pages hold their layers one after another (see
  /// model_config::page_bytes), so a range of layers is one slice of page_memory_bytes().
  page_slice layer_slice(layer_range r) const {
    const size_t per_layer = page_memory_bytes() / config().layers;
    return {r.first * per_layer, r.count() * per_layer};
  }

  /// prefill() for layers `r` of the model only: writes those layers' K and V of the chunk into
  /// seq's pages (the other layers' bytes are left as they are) and its residual stream after
  /// layer r.end - 1 into `stream` (stream_bytes(tokens.size()) bytes, float-aligned), from
  /// which the next range goes on; when r.first is 0 the stream starts from the tokens and
  /// `stream`'s input is ignored. next_token is set only when r.end is the last layer. A chunk
  /// computed range after range, in order, writes the bytes of one prefill() call, and
  /// compute_ns sums to about its time (a modeled call's overhead counts on its first range).
  /// Errors as prefill(), and: an empty or out-of-range r, a stream too small or misaligned.
  virtual caf::expected<prefill_result> prefill_layers(const sequence_ref& seq,
                                                       std::span<const uint32_t> tokens,
                                                       layer_range r,
                                                       std::span<std::byte> stream) = 0;

  /// One decode step: token i goes to position seqs[i].length_tokens of sequence i.
  virtual caf::expected<decode_result> decode(std::span<const sequence_ref> seqs,
                                              std::span<const uint32_t> tokens) = 0;
};

/// The reference engine: a small Llama-style transformer (RMSNorm, RoPE, grouped-query
/// attention, SwiGLU) on the CPU in float32, with weights drawn from cfg.seed.
caf::expected<std::unique_ptr<engine>> make_reference_engine(const model_config& cfg,
                                                             engine_options options = {});

/// Floating-point operations to compute `tokens` new tokens after `context_tokens` cached ones
/// (matmuls, attention, and the LM head for the last token): the basis of modeled timing.
double model_flops(const model_config& cfg, uint64_t context_tokens, uint64_t tokens);

/// model_flops of layers `r` only (the LM head counts with the last layer).
double layer_flops(const model_config& cfg, uint64_t context_tokens, uint64_t tokens,
                   layer_range r);

} // namespace crescent::gpu
