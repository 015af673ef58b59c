// How a worker stores a KV page as a pool block and reads it back under the cluster's codec
// (issue 23 item 2): the adapter between an engine's pages and storage/codec/kv_codec.hpp.
//
// A block is page `index` of its sequence (its token 0 at position index x block_tokens),
// holding `tokens` valid tokens; `last` says it is the sequence's last (KIVI keeps its tail
// full precision). Stored blocks are what the pool holds on DRAM and SSD and what pool reads
// carry; the pool's checksum covers these bytes.
//
//  - reference engine: the codec's own format (float32 pages in, a self-describing block out);
//  - modeled engine: its pages are stand-ins (modeled_engine.hpp), which no codec can
//    quantize; a stored block is a 32-byte header and one stand-in slot, padded with zeros to
//    the size the codec would give the model's true page, over the modeled links' scale (page
//    bytes per stand-in byte, rounded up to 8 bytes). So a simulated pool holds, and its links
//    carry, what a compressed pool would, and decoding gives back the very stand-in page.
//
// Failures: encode refuses a page of the wrong size or a block outside the shape, and a page
// the codec cannot represent (reference: NaN or infinity; modeled: not a complete stand-in);
// decode refuses anything it does not recognize as a block of this codec and model, and the
// reader counts it a miss (nothing written to the page is usable then).
#pragma once

#include "gpu/model_config.hpp"
#include "storage/codec/kv_codec.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace crescent::gpu {

class block_codec {
 public:
  virtual ~block_codec() = default;

  virtual storage::codec::codec_kind kind() const = 0;
  /// Stored bytes of block `index` with `tokens` valid tokens (0 if outside the shape).
  virtual size_t block_bytes(uint32_t index, uint32_t tokens, bool last) const = 0;
  /// Bytes of a full block in mid-sequence: what the pool's block count is sized by.
  virtual size_t full_block_bytes() const = 0;
  /// The same at the model's true size, what links carry (the conductor's time model): as
  /// full_block_bytes() for the reference engine; for the modeled engine, the bytes the codec
  /// gives the model's true page, of which its stored block is the scaled-down stand-in.
  virtual size_t full_block_model_bytes() const = 0;
  /// Encodes the page (the engine's page_memory_bytes()) into the front of `out`.
  virtual caf::expected<size_t> encode(std::span<const std::byte> page, uint32_t index,
                                       uint32_t tokens, bool last,
                                       std::span<std::byte> out) const = 0;
  /// Decodes a stored block into `page` (the engine's page_memory_bytes()); a block of another
  /// position than page `index`'s is refused.
  virtual caf::error decode(std::span<const std::byte> block, uint32_t index,
                            std::span<std::byte> page) const = 0;

  // The hand-off's blocks (actors/prefill_worker/handoff.cpp): layers [first, first + count) of
  // a page alone, so that each range of layers goes out as soon as it is computed. The block is
  // written at the range's own offset in the receiver's page (engine::layer_slice), and the
  // receiver decodes the page in place once all of it is there.

  /// Bytes of the block of layers [first, first + count) of page `index`: 0 when such a block
  /// would not fit the range's bytes in the page (the range then travels as it is: only the
  /// modeled engine's stand-ins, whose one-layer ranges are 64 bytes, ever need that).
  virtual size_t slice_bytes(uint32_t first, uint32_t count, uint32_t index, uint32_t tokens,
                             bool last) const = 0;
  /// Encodes layers [first, first + count) of `page` into the front of `out`.
  virtual caf::expected<size_t> encode_slice(std::span<const std::byte> page, uint32_t first,
                                             uint32_t count, uint32_t index, uint32_t tokens,
                                             bool last, std::span<std::byte> out) const = 0;
  /// Decodes page `index` in place: from layer 0, each range's block at its offset (or, for the
  /// modeled engine, a range sent as it is), through `scratch` (a page's bytes). Any block that
  /// is not one of this codec's, of this page, or that overruns the page fails the whole page.
  virtual caf::error decode_slices(std::span<std::byte> page, uint32_t index,
                                   std::span<std::byte> scratch) const = 0;
};

/// The cluster file's codec settings (kv_codec and codec:).
struct block_codec_options {
  storage::codec::codec_kind kind = storage::codec::codec_kind::none;
  uint32_t group_tokens = 64;       // KIVI
  uint32_t sink_tokens = 1;         // KVQuant: positions kept float32
  uint32_t calibration_prompts = 4; // KVQuant: the reference engine's calibration run
  uint32_t calibration_prompt_tokens = 512;
  uint64_t calibration_seed = 1;
  bool handoff = true; // the prefill-to-decode hand-off carries blocks too (false: full pages)
};
inline constexpr uint32_t calibration_prompts_max = 64;

/// The codec's view of `m`'s pages; an error if the shape is outside the codecs' limits.
caf::expected<storage::codec::kv_shape> codec_shape(const model_config& m);

/// Checks the options against the limits and `m`'s shape (the error names the field).
caf::error check_block_codec(const model_config& m, const block_codec_options& o);

/// KVQuant's calibrations (one per entry of `bits`) for the reference engine of `m`, from its
/// prefill of o.calibration_prompts seeded random prompts of o.calibration_prompt_tokens
/// tokens, every page of them. Deterministic: every process of a cluster fits the very same
/// calibration (blocks carry its hash, and a reader with another refuses them).
caf::expected<std::vector<std::shared_ptr<const storage::codec::kvquant_calibration>>>
calibrate_reference(const model_config& m, std::span<const uint32_t> bits,
                    const block_codec_options& o);

/// The reference engine's codec (KVQuant's calibrated here, which takes a calibration run).
caf::expected<std::shared_ptr<const block_codec>>
make_reference_codec(const model_config& m, const block_codec_options& o);

/// The modeled engine's codec for `m`, the profile's model.
caf::expected<std::shared_ptr<const block_codec>> make_modeled_codec(const model_config& m,
                                                                     const block_codec_options& o);

} // namespace crescent::gpu
