// KV block codecs (issue 23): compress one KV page for the pool and the wire, and give it back.
//
// A codec is a pair of pure functions over one block: encode(config, page) -> bytes and
// decode(config, bytes) -> page. The page is the reference engine's: float32 elements laid out
// [layer][K|V][kv_head][token][head_dim] (gpu::model_config::page_bytes with kv_element_bytes
// 4), of which tokens [0, tokens) are valid. The bytes start with a self-describing header
// (which codec, format version, shape, group size, the KVQuant calibration's hash, a checksum),
// so a reader needs nothing but its own config to decode a block or refuse it.
//
// Codecs (docs/kv_compression.md has every byte of every format):
//  - none:     the valid tokens' float32 elements as they are (lossless).
//  - int8:     symmetric, per token and head: one float32 scale (absmax / 127) per head vector.
//  - kivi2/4:  KIVI-style asymmetric 2 or 4 bits with fp16 scale and zero point: keys per
//              channel over groups of group_tokens tokens, values per token over groups of
//              min(group_tokens, head_dim) channels. In the sequence's last block the tokens
//              after its last complete key group stay float32 (KIVI's full-precision residual).
//  - kvquant3/4: KVQuant-style 3 or 4 bits: keys un-rotated (RoPE undone, so quantized
//              pre-RoPE) and normalized per channel with offline-calibrated ranges; values
//              normalized per token online (fp16 centre and half-range); both quantized to a
//              non-uniform codebook calibrated per layer (k-means over a calibration run of the
//              reference engine, kvquant_calibration.hpp); the largest ~1% of each head vector
//              kept exactly as sparse outliers; the attention-sink tokens (positions below
//              sink_tokens) kept float32. Decoding re-applies RoPE at the block's positions.
//
// Failures (caf::expected with crescent::errc; nothing here throws). Encode: a config outside
// the limits below (limit_exceeded / invalid_argument), a page of the wrong size, 0 or too many
// tokens (invalid_argument), a NaN or infinity in a valid token (invalid_argument: such KV is a
// bug upstream and no codec can represent it), an output buffer too small (no_space). Decode,
// each of which the caller treats as a miss (nothing written to `page` is usable): a header
// that is not ours, of another format version or an unknown codec (invalid_argument); another
// shape than the reader's (invalid_argument); a payload or header changed after encoding
// (checksum_mismatch); a KVQuant block encoded with another calibration than the reader's
// (not_found). A block never decodes to garbage silently short of an XXH3-64 collision.
#pragma once

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace crescent::storage::codec {

enum class codec_kind : uint8_t {
  none = 0,
  int8 = 1,
  kivi2 = 2,
  kivi4 = 3,
  kvquant3 = 4,
  kvquant4 = 5,
};
inline constexpr uint8_t codec_kind_count = 6;

/// "none", "int8", "kivi2", "kivi4", "kvquant3", "kvquant4": the cluster file's words.
const char* to_string(codec_kind kind);
caf::expected<codec_kind> parse_codec_kind(std::string_view word);
/// Bits per quantized element: 32 (none), 8, 2, 4, 3, 4.
uint32_t codec_bits(codec_kind kind);

/// The shape of one page: [layer][K|V][kv_head][token][head_dim] float32.
struct kv_shape {
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t block_tokens = 0;

  /// Floats of one [block_tokens][head_dim] slab (one layer, K or V, one head).
  size_t slab_floats() const { return size_t{block_tokens} * head_dim; }
  size_t page_floats() const { return size_t{layers} * 2 * kv_heads * slab_floats(); }
  /// Float offset of the slab of (layer, K=0 | V=1, kv_head).
  size_t slab_offset(uint32_t layer, uint32_t kind, uint32_t kv_head) const {
    return ((size_t{layer} * 2 + kind) * kv_heads + kv_head) * slab_floats();
  }
  bool operator==(const kv_shape&) const = default;
};

/// Limits on every field: a config or header outside them is refused.
inline constexpr uint32_t codec_layers_max = 128;
inline constexpr uint32_t codec_kv_heads_max = 64;
inline constexpr uint32_t codec_head_dim_min = 8;   // and a multiple of 8: codes pack by rows
inline constexpr uint32_t codec_head_dim_max = 256; // outlier channels are one byte
inline constexpr uint32_t codec_block_tokens_max = 4096;
inline constexpr uint32_t codec_group_tokens_min = 8; // and a multiple of 8
inline constexpr uint32_t codec_group_tokens_max = 1024;
inline constexpr uint32_t codec_sink_tokens_max = 64;
inline constexpr size_t codec_page_bytes_max = size_t{1} << 30; // as gpu::model_page_bytes_max

/// Bytes of the block header that starts every encoded block.
inline constexpr size_t block_header_bytes = 48;

struct kvquant_calibration; // kvquant_calibration.hpp

struct codec_config {
  codec_kind kind = codec_kind::none;
  kv_shape shape;
  /// KIVI: tokens per key group and channels per value group (capped at block_tokens and
  /// head_dim). 64 keeps 4-bit above 3.5x against fp16 with 128-dimensional heads.
  uint32_t group_tokens = 64;
  /// KVQuant: the calibration (codebooks, key ranges, RoPE tables) that encodes and decodes;
  /// required by kvquant3/4 (with bits and shape to match), ignored by the others. Its
  /// sink_tokens say which positions stay float32.
  std::shared_ptr<const kvquant_calibration> calibration = nullptr;
};

/// Checks the config against the limits (the error names the field).
caf::error validate(const codec_config& config);

/// One block to encode: the page, how many of its tokens are valid, the position of its token
/// 0 in the sequence (block index x block_tokens: KVQuant's RoPE and sinks), and whether it is
/// the sequence's last block (KIVI's full-precision residual).
struct block_in {
  std::span<const float> page; // shape.page_floats()
  uint32_t tokens = 0;         // 1 to block_tokens
  uint32_t first_position = 0;
  bool last_of_sequence = false;
};

/// What a header says about its block.
struct block_info {
  codec_kind kind = codec_kind::none;
  kv_shape shape;
  uint32_t tokens = 0;
  uint32_t first_position = 0;
  bool last_of_sequence = false;
  uint32_t group_tokens = 0;     // KIVI's group as configured (capped per block); 0 else
  uint64_t calibration_hash = 0; // KVQuant's; 0 for the others
  size_t encoded_bytes = 0;      // header and payload
};

/// Exact bytes encode() writes for this block (every format has a size fixed by the shape, the
/// token count, the position and the last flag). 0 if the config is invalid.
size_t encoded_bytes(const codec_config& config, uint32_t tokens, uint32_t first_position,
                     bool last_of_sequence);
/// The most any block of this config takes: what a pool allocates per block.
size_t encoded_bytes_max(const codec_config& config);
/// What encoded_bytes() gives for a block of `kind` and `shape` without a config to validate:
/// KVQuant's size needs only the calibration's sink_tokens, so a simulation sizes blocks of a
/// model it never computes (gpu/block_codec.hpp). 0 if the shape, group or tokens are outside
/// the limits.
size_t encoded_bytes_of(codec_kind kind, const kv_shape& shape, uint32_t group_tokens,
                        uint32_t sink_tokens, uint32_t tokens, uint32_t first_position,
                        bool last_of_sequence);

/// Encodes `block` into the front of `out`; returns the bytes written (encoded_bytes(...)).
caf::expected<size_t> encode(const codec_config& config, const block_in& block,
                             std::span<std::byte> out);

/// Reads and checks a header alone (magic, version, codec, limits, sizes); no checksum.
caf::expected<block_info> read_header(std::span<const std::byte> block);

/// Decodes `block` into `page` (shape.page_floats() floats; tokens past the block's valid ones
/// are zeroed). The header's shape must be the reader's; its codec and group size are taken
/// from the header, so a reader configured for one codec decodes blocks of any other (KVQuant
/// blocks only with the very calibration they were encoded with).
caf::expected<block_info> decode(const codec_config& config, std::span<const std::byte> block,
                                 std::span<float> page);

} // namespace crescent::storage::codec
