#include "storage/block_key.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>

namespace crescent::storage {

// Tokens are hashed as they lie in memory, which is their little-endian encoding only here.
static_assert(std::endian::native == std::endian::little, "block keys hash little-endian tokens");

namespace {

constexpr std::byte chain_step_tag{0x01};

void put_be64(uint64_t x, std::byte* out) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<std::byte>(x >> (56 - 8 * i));
}

} // namespace

block_key chain_key(const block_key& parent, std::span<const uint32_t> tokens) {
  std::array<std::byte, 17> head{};
  head[0] = chain_step_tag;
  put_be64(parent.hi, head.data() + 1);
  put_be64(parent.lo, head.data() + 9);
  return sha256_key({head, std::as_bytes(tokens)});
}

std::vector<block_key> chain_block_keys(std::span<const uint32_t> tokens, uint32_t block_tokens,
                                        const block_key& root) {
  assert(block_tokens > 0);
  std::vector<block_key> keys;
  keys.reserve((tokens.size() + block_tokens - 1) / block_tokens);
  block_key parent = root;
  for (size_t begin = 0; begin < tokens.size(); begin += block_tokens) {
    const size_t n = std::min<size_t>(block_tokens, tokens.size() - begin);
    parent = chain_key(parent, tokens.subspan(begin, n));
    keys.push_back(parent);
  }
  return keys;
}

} // namespace crescent::storage
