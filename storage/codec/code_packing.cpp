// Packing rows of 2-, 3- and 4-bit codes (the layout is described at pack_codes).
#include "storage/codec/codec_internal.hpp"

namespace crescent::storage::codec::detail {

namespace {

CODEC_CLONES void pack4(const uint8_t* c, uint32_t n, uint8_t* out) {
  const uint32_t h = n / 2;
  for (uint32_t i = 0; i < h; ++i)
    out[i] = static_cast<uint8_t>(c[i] | c[i + h] << 4);
}

CODEC_CLONES void unpack4(const uint8_t* in, uint32_t n, uint8_t* c) {
  const uint32_t h = n / 2;
  for (uint32_t i = 0; i < h; ++i) {
    c[i] = in[i] & 15;
    c[i + h] = in[i] >> 4;
  }
}

// Only the low two bits of each code are taken, so 3-bit codes pass through here too.
CODEC_CLONES void pack2(const uint8_t* c, uint32_t n, uint8_t* out) {
  const uint32_t q = n / 4;
  for (uint32_t i = 0; i < q; ++i)
    out[i] = static_cast<uint8_t>((c[i] & 3) | (c[i + q] & 3) << 2 | (c[i + 2 * q] & 3) << 4 |
                                  (c[i + 3 * q] & 3) << 6);
}

CODEC_CLONES void unpack2(const uint8_t* in, uint32_t n, uint8_t* c) {
  const uint32_t q = n / 4;
  for (uint32_t i = 0; i < q; ++i) {
    c[i] = in[i] & 3;
    c[i + q] = (in[i] >> 2) & 3;
    c[i + 2 * q] = (in[i] >> 4) & 3;
    c[i + 3 * q] = in[i] >> 6;
  }
}

// Bit 2 of every code as a plane: byte i holds codes i + j n/8 at bit j.
CODEC_CLONES void pack_plane(const uint8_t* c, uint32_t n, uint8_t* out) {
  const uint32_t e = n / 8;
  for (uint32_t i = 0; i < e; ++i) {
    uint32_t byte = 0;
    for (uint32_t j = 0; j < 8; ++j)
      byte |= uint32_t{(c[i + j * e] >> 2) & 1u} << j;
    out[i] = static_cast<uint8_t>(byte);
  }
}

CODEC_CLONES void unpack_plane(const uint8_t* in, uint32_t n, uint8_t* c) {
  const uint32_t e = n / 8;
  for (uint32_t j = 0; j < 8; ++j)
    for (uint32_t i = 0; i < e; ++i)
      c[i + j * e] |= static_cast<uint8_t>(((in[i] >> j) & 1) << 2);
}

} // namespace

void pack_codes(const uint8_t* codes, uint32_t n, uint32_t bits, std::byte* out) {
  auto* o = reinterpret_cast<uint8_t*>(out);
  if (bits == 4) {
    pack4(codes, n, o);
  } else if (bits == 2) {
    pack2(codes, n, o);
  } else { // 3
    pack2(codes, n, o);
    pack_plane(codes, n, o + n / 4);
  }
}

void unpack_codes(const std::byte* in, uint32_t n, uint32_t bits, uint8_t* codes) {
  const auto* i = reinterpret_cast<const uint8_t*>(in);
  if (bits == 4) {
    unpack4(i, n, codes);
  } else if (bits == 2) {
    unpack2(i, n, codes);
  } else { // 3
    unpack2(i, n, codes);
    unpack_plane(i + n / 4, n, codes);
  }
}

} // namespace crescent::storage::codec::detail
