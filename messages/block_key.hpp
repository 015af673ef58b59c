// The identity of a KV block in the pool: 128 bits of a chained SHA-256 (storage/block_key.hpp
// says how they are made). Every actor, message and record names a block by one of these.
//
// On the wire a key is a BlockKey struct (common.capnp); read and write them only through the
// helpers here, so that no code copies a key word by word.
#pragma once

#include "messages/schema/common.capnp.h"

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace crescent {

struct block_key {
  uint64_t hi = 0;
  uint64_t lo = 0;

  friend constexpr auto operator<=>(const block_key&, const block_key&) = default;
  friend constexpr bool operator==(const block_key&, const block_key&) = default;
};

/// 32 lower-case hex digits, hi first: how keys appear in logs and errors.
std::string to_string(const block_key& key);

/// The first 128 bits of SHA-256 over the concatenation of `parts`; hi is the digest's first
/// eight bytes read big-endian. What block keys and their chain's root are made of.
block_key sha256_key(std::initializer_list<std::span<const std::byte>> parts);

/// The key as 16 big-endian bytes (hi first) at `out`: how keys sort and are stored on disk.
inline void store_be(const block_key& key, char* out) {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>(key.hi >> (56 - 8 * i));
    out[8 + i] = static_cast<char>(key.lo >> (56 - 8 * i));
  }
}

/// The key stored by store_be at `in`.
inline block_key load_be(const char* in) {
  block_key key;
  for (int i = 0; i < 8; ++i) {
    key.hi = key.hi << 8 | static_cast<uint8_t>(in[i]);
    key.lo = key.lo << 8 | static_cast<uint8_t>(in[8 + i]);
  }
  return key;
}

inline block_key read_key(wire::BlockKey::Reader in) {
  return {in.getHi(), in.getLo()};
}

inline void write_key(wire::BlockKey::Builder out, const block_key& key) {
  out.setHi(key.hi);
  out.setLo(key.lo);
}

inline std::vector<block_key> to_keys(capnp::List<wire::BlockKey>::Reader in) {
  std::vector<block_key> out;
  out.reserve(in.size());
  for (auto k : in)
    out.push_back(read_key(k));
  return out;
}

/// Writes `keys` into a list initialised to exactly their count.
inline void write_keys(capnp::List<wire::BlockKey>::Builder out, std::span<const block_key> keys) {
  for (size_t i = 0; i < keys.size(); ++i)
    write_key(out[static_cast<unsigned>(i)], keys[i]);
}

} // namespace crescent

template <>
struct std::hash<crescent::block_key> {
  // Real keys are hash outputs, so either word alone spreads well; mixing hi in keeps small
  // hand-made keys of tests and benchmarks ({0, i}) and {i, 0} apart too.
  size_t operator()(const crescent::block_key& k) const noexcept {
    return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull));
  }
};
