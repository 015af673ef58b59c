// The codecs' common part: names, limits, the block plan, the header, and encode/decode
// dispatching to the families (int8_codec.cpp, kivi_codec.cpp, kvquant_codec.cpp).
#include "storage/codec/kv_codec.hpp"

#include "messages/errors.hpp"
#include "messages/xxh3.hpp"
#include "storage/codec/codec_internal.hpp"
#include "storage/codec/kvquant_calibration.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <string>

namespace crescent::storage::codec {

using std::to_string;

namespace {

constexpr std::array<const char*, codec_kind_count> kind_names = {"none",  "int8",     "kivi2",
                                                                  "kivi4", "kvquant3", "kvquant4"};
constexpr uint32_t header_magic = 0x43564b43; // "CKVC" in the first four bytes
constexpr uint8_t format_version = 1;
constexpr uint8_t flag_last = 1;
constexpr size_t checksummed_header_bytes = 40; // the checksum's own 8 bytes follow

bool is_kivi(codec_kind kind) {
  return kind == codec_kind::kivi2 || kind == codec_kind::kivi4;
}

bool is_kvquant(codec_kind kind) {
  return kind == codec_kind::kvquant3 || kind == codec_kind::kvquant4;
}

caf::error bad(errc code, std::string what) {
  return make_error(code, "kv codec: " + std::move(what));
}

caf::error check_range(const char* field, uint64_t value, uint64_t low, uint64_t high) {
  if (value >= low && value <= high)
    return {};
  return bad(errc::limit_exceeded, std::string{field} + " " + to_string(value) + " outside [" +
                                       to_string(low) + ", " + to_string(high) + "]");
}

caf::error check_shape(const kv_shape& s) {
  if (auto err = check_range("layers", s.layers, 1, codec_layers_max))
    return err;
  if (auto err = check_range("kv_heads", s.kv_heads, 1, codec_kv_heads_max))
    return err;
  if (auto err = check_range("head_dim", s.head_dim, codec_head_dim_min, codec_head_dim_max))
    return err;
  if (s.head_dim % 8 != 0)
    return bad(errc::invalid_argument,
               "head_dim " + to_string(s.head_dim) + " is not a multiple of 8");
  if (auto err = check_range("block_tokens", s.block_tokens, 1, codec_block_tokens_max))
    return err;
  return check_range("page bytes", s.page_floats() * sizeof(float), 1, codec_page_bytes_max);
}

caf::error check_group(uint32_t group_tokens) {
  if (auto err =
          check_range("group_tokens", group_tokens, codec_group_tokens_min, codec_group_tokens_max))
    return err;
  if (group_tokens % 8 != 0)
    return bad(errc::invalid_argument,
               "group_tokens " + to_string(group_tokens) + " is not a multiple of 8");
  return {};
}

size_t payload_bytes(const detail::block_plan& plan) {
  switch (plan.kind) {
  case codec_kind::none:
    return detail::none_payload_bytes(plan);
  case codec_kind::int8:
    return detail::int8_payload_bytes(plan);
  case codec_kind::kivi2:
  case codec_kind::kivi4:
    return detail::kivi_payload_bytes(plan);
  case codec_kind::kvquant3:
  case codec_kind::kvquant4:
    return detail::kvquant_payload_bytes(plan);
  }
  return 0;
}

uint32_t sink_tokens_of(const codec_config& config) {
  return config.calibration ? config.calibration->sink_tokens : 0;
}

detail::block_plan plan_of(const codec_config& config, uint32_t tokens, uint32_t first_position,
                           bool last) {
  auto plan = detail::make_plan(config.kind, config.shape, config.group_tokens,
                                sink_tokens_of(config), tokens, first_position, last);
  if (is_kvquant(config.kind))
    plan.calibration_hash = config.calibration->hash;
  return plan;
}

// The largest magnitude among n floats, as bits. On the bits: |x| of a float orders as its
// bits with the sign cleared, and every non-finite value is at least 0x7f800000, so one
// integer max finds NaN and infinity too.
CODEC_CLONES uint32_t max_abs_bits(const float* x, size_t n) {
  uint32_t top = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  return top;
}

// A slab's valid tokens: NaN and infinity refused, and magnitudes past the fp16 scales and
// zero points of the formats that have them.
caf::error check_slab(const codec_config& config, const block_in& block, const float* x) {
  const uint32_t top = max_abs_bits(x, size_t{block.tokens} * config.shape.head_dim);
  if (top >= 0x7f800000u)
    return bad(errc::invalid_argument, "the page holds a NaN or an infinity among its " +
                                           to_string(block.tokens) +
                                           " valid tokens: refused, no codec represents it");
  const bool fp16_scales = config.kind != codec_kind::none && config.kind != codec_kind::int8;
  if (fp16_scales && std::bit_cast<float>(top) > detail::fp16_max)
    return bad(errc::limit_exceeded, std::string{to_string(config.kind)} + ": an element of " +
                                         to_string(std::bit_cast<float>(top)) +
                                         " is beyond the fp16 range of its scales (65504)");
  return {};
}

caf::error check_block(const codec_config& config, const block_in& block) {
  if (block.page.size() != config.shape.page_floats())
    return bad(errc::invalid_argument, "page of " + to_string(block.page.size()) +
                                           " floats, the shape needs " +
                                           to_string(config.shape.page_floats()));
  if (block.tokens == 0 || block.tokens > config.shape.block_tokens)
    return bad(errc::invalid_argument, "tokens " + to_string(block.tokens) + " outside [1, " +
                                           to_string(config.shape.block_tokens) + "]");
  if (uint64_t{block.first_position} + block.tokens > UINT32_MAX)
    return bad(errc::out_of_range, "positions past 2^32");
  if (is_kvquant(config.kind) &&
      block.first_position + block.tokens > config.calibration->positions_max)
    return bad(errc::out_of_range, "positions up to " +
                                       to_string(block.first_position + block.tokens) +
                                       " past the calibration's RoPE tables (" +
                                       to_string(config.calibration->positions_max) + ")");
  return {};
}

void write_header(const detail::block_plan& plan, std::byte* out) {
  std::byte* at = out;
  detail::put<uint32_t>(at, header_magic);
  detail::put<uint8_t>(at, format_version);
  detail::put<uint8_t>(at, static_cast<uint8_t>(plan.kind));
  detail::put<uint8_t>(at, plan.last ? flag_last : 0);
  detail::put<uint8_t>(at, 0);
  for (uint32_t v :
       {plan.shape.layers, plan.shape.kv_heads, plan.shape.head_dim, plan.shape.block_tokens,
        plan.tokens, plan.group_tokens, plan.full_first, plan.full_last})
    detail::put<uint16_t>(at, static_cast<uint16_t>(v));
  detail::put<uint32_t>(at, plan.first_position);
  detail::put<uint32_t>(at, static_cast<uint32_t>(plan.payload_bytes));
  detail::put<uint64_t>(at, plan.calibration_hash);
}

uint64_t block_checksum(std::span<const std::byte> header, std::span<const std::byte> payload) {
  const uint64_t seed = xxh3_64(header.data(), checksummed_header_bytes);
  return xxh3_64_seeded(payload.data(), payload.size(), seed);
}

struct raw_header {
  uint32_t magic = 0;
  uint8_t version = 0, kind = 0, flags = 0, reserved = 0;
  std::array<uint16_t, 8> fields{}; // layers .. full_last, in write_header's order
  uint32_t first_position = 0, payload_bytes = 0;
  uint64_t calibration_hash = 0, checksum = 0;
};

raw_header parse_raw(const std::byte* at) {
  raw_header h;
  h.magic = detail::get<uint32_t>(at);
  h.version = detail::get<uint8_t>(at);
  h.kind = detail::get<uint8_t>(at);
  h.flags = detail::get<uint8_t>(at);
  h.reserved = detail::get<uint8_t>(at);
  for (auto& f : h.fields)
    f = detail::get<uint16_t>(at);
  h.first_position = detail::get<uint32_t>(at);
  h.payload_bytes = detail::get<uint32_t>(at);
  h.calibration_hash = detail::get<uint64_t>(at);
  h.checksum = detail::get<uint64_t>(at);
  return h;
}

caf::error check_identity(const raw_header& h) {
  if (h.magic != header_magic)
    return bad(errc::invalid_argument, "not a KV codec block (bad magic)");
  if (h.version != format_version)
    return bad(errc::invalid_argument,
               "block of format version " + to_string(h.version) + ", this reader knows 1");
  if (h.kind >= codec_kind_count)
    return bad(errc::invalid_argument, "unknown codec id " + to_string(h.kind));
  if ((h.flags & ~flag_last) != 0 || h.reserved != 0)
    return bad(errc::invalid_argument, "unknown header flags");
  return {};
}

// The plan a header implies, checked against the limits and against the fields the encoder
// derived (group, sinks, residual, payload size): a header that disagrees is refused before any
// byte of its payload is read.
caf::expected<detail::block_plan> plan_of_header(const raw_header& h) {
  const auto kind = static_cast<codec_kind>(h.kind);
  const kv_shape shape{h.fields[0], h.fields[1], h.fields[2], h.fields[3]};
  if (auto err = check_shape(shape))
    return err;
  const uint32_t tokens = h.fields[4];
  if (tokens == 0 || tokens > shape.block_tokens)
    return bad(errc::invalid_argument, "header tokens " + to_string(tokens) + " outside [1, " +
                                           to_string(shape.block_tokens) + "]");
  if (is_kivi(kind))
    if (auto err = check_group(h.fields[5]))
      return err;
  if (h.fields[6] > codec_sink_tokens_max)
    return bad(errc::limit_exceeded, "header sink tokens " + to_string(h.fields[6]));
  // Sinks are the block's tokens at positions below sink_tokens; a block that holds some says
  // sink_tokens is at least first_position + their count, which yields the same plan.
  const uint32_t sink_tokens = h.fields[6] > 0 ? h.first_position + h.fields[6] : 0;
  auto plan = detail::make_plan(kind, shape, h.fields[5], sink_tokens, tokens, h.first_position,
                                (h.flags & flag_last) != 0);
  plan.calibration_hash = h.calibration_hash;
  if (plan.group_tokens != h.fields[5] || plan.full_first != h.fields[6] ||
      plan.full_last != h.fields[7] || plan.payload_bytes != h.payload_bytes ||
      (!is_kvquant(kind) && h.calibration_hash != 0))
    return bad(errc::invalid_argument, "header fields disagree with each other");
  return plan;
}

block_info info_of(const detail::block_plan& plan) {
  return {
      plan.kind, plan.shape,        plan.tokens,           plan.first_position,
      plan.last, plan.group_tokens, plan.calibration_hash, block_header_bytes + plan.payload_bytes};
}

caf::expected<detail::block_plan> read_plan(std::span<const std::byte> block) {
  if (block.size() < block_header_bytes)
    return bad(errc::invalid_argument,
               "block of " + to_string(block.size()) + " bytes, shorter than a header");
  const raw_header h = parse_raw(block.data());
  if (auto err = check_identity(h))
    return err;
  return plan_of_header(h);
}

// A KVQuant block decodes only under the calibration it was encoded with: the same codes mean
// other values under another one.
caf::error check_calibration(const codec_config& config, const detail::block_plan& plan) {
  const auto& cal = config.calibration;
  if (!cal || cal->hash != plan.calibration_hash || cal->bits != plan.bits() ||
      !(cal->shape == config.shape))
    return bad(errc::not_found, std::string{to_string(plan.kind)} +
                                    " block of a calibration this reader does not hold: a miss");
  const auto expected = detail::make_plan(plan.kind, plan.shape, 0, cal->sink_tokens, plan.tokens,
                                          plan.first_position, plan.last);
  if (expected.full_first != plan.full_first)
    return bad(errc::invalid_argument, "block's sink tokens disagree with the calibration's");
  if (uint64_t{plan.first_position} + plan.tokens > cal->positions_max)
    return bad(errc::out_of_range, "block positions past the calibration's RoPE tables");
  return {};
}

// Rows past the valid tokens of every slab: decoders write only the valid ones.
void zero_invalid_rows(const kv_shape& shape, uint32_t tokens, float* page) {
  if (tokens == shape.block_tokens)
    return;
  const size_t valid = size_t{tokens} * shape.head_dim;
  for (size_t slab = 0; slab < size_t{shape.layers} * 2 * shape.kv_heads; ++slab) {
    float* x = page + slab * shape.slab_floats();
    std::fill(x + valid, x + shape.slab_floats(), 0.0f);
  }
}

} // namespace

const char* to_string(codec_kind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kind_names.size() ? kind_names[i] : "unknown";
}

caf::expected<codec_kind> parse_codec_kind(std::string_view word) {
  for (size_t i = 0; i < kind_names.size(); ++i)
    if (word == kind_names[i])
      return static_cast<codec_kind>(i);
  return bad(errc::invalid_argument, "unknown codec '" + std::string{word} +
                                         "' (none, int8, kivi2, kivi4, kvquant3, kvquant4)");
}

uint32_t codec_bits(codec_kind kind) {
  switch (kind) {
  case codec_kind::none:
    return 32;
  case codec_kind::int8:
    return 8;
  case codec_kind::kivi2:
    return 2;
  case codec_kind::kivi4:
  case codec_kind::kvquant4:
    return 4;
  case codec_kind::kvquant3:
    return 3;
  }
  return 0;
}

namespace detail {

block_plan make_plan(codec_kind kind, const kv_shape& shape, uint32_t group_tokens,
                     uint32_t sink_tokens, uint32_t tokens, uint32_t first_position, bool last) {
  block_plan plan;
  plan.kind = kind;
  plan.shape = shape;
  plan.tokens = tokens;
  plan.first_position = first_position;
  plan.last = last;
  if (is_kivi(kind)) {
    plan.group_tokens = group_tokens;
    plan.key_group = std::min(group_tokens, shape.block_tokens);
    plan.value_group = std::min(group_tokens, shape.head_dim);
    plan.full_last = last ? tokens % plan.key_group : 0;
  }
  if (is_kvquant(kind)) {
    if (first_position < sink_tokens)
      plan.full_first = std::min(tokens, sink_tokens - first_position);
    plan.outliers = kvquant_outliers_per_vector(shape.head_dim);
  }
  plan.payload_bytes = payload_bytes(plan);
  return plan;
}

std::byte* put_rows(const float* rows, uint32_t tokens, uint32_t head_dim, std::byte* out) {
  const size_t bytes = size_t{tokens} * head_dim * sizeof(float);
  std::memcpy(out, rows, bytes);
  return out + bytes;
}

const std::byte* get_rows(const std::byte* in, uint32_t tokens, uint32_t head_dim, float* rows) {
  const size_t bytes = size_t{tokens} * head_dim * sizeof(float);
  std::memcpy(rows, in, bytes);
  return in + bytes;
}

} // namespace detail

caf::error validate(const codec_config& config) {
  if (static_cast<uint8_t>(config.kind) >= codec_kind_count)
    return bad(errc::invalid_argument, "unknown codec id");
  if (auto err = check_shape(config.shape))
    return err;
  if (is_kivi(config.kind))
    return check_group(config.group_tokens);
  if (!is_kvquant(config.kind))
    return {};
  const auto& cal = config.calibration;
  if (!cal)
    return bad(errc::invalid_argument,
               std::string{to_string(config.kind)} + " needs a calibration");
  if (cal->bits != codec_bits(config.kind))
    return bad(errc::invalid_argument,
               "a " + to_string(cal->bits) + "-bit calibration for " + to_string(config.kind));
  if (!(cal->shape == config.shape))
    return bad(errc::invalid_argument, "the calibration was fitted for another shape");
  return {};
}

size_t encoded_bytes(const codec_config& config, uint32_t tokens, uint32_t first_position,
                     bool last_of_sequence) {
  if (validate(config) || tokens == 0 || tokens > config.shape.block_tokens)
    return 0;
  return block_header_bytes +
         plan_of(config, tokens, first_position, last_of_sequence).payload_bytes;
}

size_t encoded_bytes_of(codec_kind kind, const kv_shape& shape, uint32_t group_tokens,
                        uint32_t sink_tokens, uint32_t tokens, uint32_t first_position,
                        bool last_of_sequence) {
  codec_config probe;
  probe.kind = is_kvquant(kind) ? codec_kind::int8 : kind; // validated without a calibration
  probe.shape = shape;
  probe.group_tokens = group_tokens;
  if (validate(probe) || sink_tokens > codec_sink_tokens_max || tokens == 0 ||
      tokens > shape.block_tokens)
    return 0;
  return block_header_bytes + detail::make_plan(kind, shape, group_tokens, sink_tokens, tokens,
                                                first_position, last_of_sequence)
                                  .payload_bytes;
}

size_t encoded_bytes_max(const codec_config& config) {
  // Float32 rows cost the most, so the largest block keeps the most of them: the first block
  // (sinks) or a last one with the longest residual (block_tokens - 1 tokens past a group).
  size_t most = 0;
  for (uint32_t tokens : {config.shape.block_tokens, config.shape.block_tokens - 1})
    for (bool last : {false, true})
      if (tokens > 0)
        most = std::max(most, encoded_bytes(config, tokens, 0, last));
  return most;
}

caf::expected<size_t> encode(const codec_config& config, const block_in& block,
                             std::span<std::byte> out) {
  if (auto err = validate(config))
    return err;
  if (auto err = check_block(config, block))
    return err;
  const auto plan = plan_of(config, block.tokens, block.first_position, block.last_of_sequence);
  const size_t total = block_header_bytes + plan.payload_bytes;
  if (out.size() < total)
    return bad(errc::no_space, "output of " + to_string(out.size()) + " bytes, the block needs " +
                                   to_string(total));
  // Slab by slab, each checked and then encoded while it is in cache: one pass over the page's
  // memory instead of two. A refused slab leaves `out` partly written, and an error.
  std::byte* payload = out.data() + block_header_bytes;
  std::byte* at = payload;
  const auto& shape = config.shape;
  const size_t slabs = size_t{shape.layers} * 2 * shape.kv_heads;
  for (size_t slab = 0; slab < slabs; ++slab) {
    const float* x = block.page.data() + slab * shape.slab_floats();
    if (auto err = check_slab(config, block, x))
      return err;
    const auto id = detail::slab_of(shape, slab);
    switch (plan.kind) {
    case codec_kind::none:
      at = detail::none_encode_slab(plan, x, at);
      break;
    case codec_kind::int8:
      at = detail::int8_encode_slab(plan, x, at);
      break;
    case codec_kind::kivi2:
    case codec_kind::kivi4:
      at = detail::kivi_encode_slab(plan, id, x, at);
      break;
    case codec_kind::kvquant3:
    case codec_kind::kvquant4:
      at = detail::kvquant_encode_slab(plan, *config.calibration, id, x,
                                       slab + 1 < slabs ? x + shape.slab_floats() : nullptr, at);
      break;
    }
  }
  assert(at == payload + plan.payload_bytes);
  write_header(plan, out.data());
  const uint64_t sum = block_checksum(out, {payload, plan.payload_bytes});
  std::byte* sum_at = out.data() + checksummed_header_bytes;
  detail::put<uint64_t>(sum_at, sum);
  return total;
}

caf::expected<block_info> read_header(std::span<const std::byte> block) {
  auto plan = read_plan(block);
  if (!plan)
    return plan.error();
  return info_of(*plan);
}

caf::expected<block_info> decode(const codec_config& config, std::span<const std::byte> block,
                                 std::span<float> page) {
  if (auto err = check_shape(config.shape))
    return err;
  auto plan = read_plan(block);
  if (!plan)
    return plan.error();
  if (!(plan->shape == config.shape))
    return bad(errc::invalid_argument, "block of another shape than the reader's");
  if (page.size() != config.shape.page_floats())
    return bad(errc::invalid_argument, "page of " + to_string(page.size()) +
                                           " floats, the shape needs " +
                                           to_string(config.shape.page_floats()));
  if (block.size() != block_header_bytes + plan->payload_bytes)
    return bad(errc::invalid_argument, "block of " + to_string(block.size()) +
                                           " bytes, its header says " +
                                           to_string(block_header_bytes + plan->payload_bytes));
  const auto payload = block.subspan(block_header_bytes);
  if (block_checksum(block, payload) != parse_raw(block.data()).checksum)
    return bad(errc::checksum_mismatch, "block changed after encoding (checksum mismatch)");
  if (is_kvquant(plan->kind))
    if (auto err = check_calibration(config, *plan))
      return err;
  switch (plan->kind) {
  case codec_kind::none:
    detail::none_decode(*plan, payload.data(), page.data());
    break;
  case codec_kind::int8:
    detail::int8_decode(*plan, payload.data(), page.data());
    break;
  case codec_kind::kivi2:
  case codec_kind::kivi4:
    detail::kivi_decode(*plan, payload.data(), page.data());
    break;
  case codec_kind::kvquant3:
  case codec_kind::kvquant4:
    if (!detail::kvquant_decode(*plan, *config.calibration, payload.data(), page.data()))
      return bad(errc::invalid_argument, "corrupt payload: an outlier channel past head_dim");
    break;
  }
  zero_invalid_rows(config.shape, plan->tokens, page.data());
  return info_of(*plan);
}

} // namespace crescent::storage::codec
