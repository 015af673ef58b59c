#include "storage/block_key.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>

namespace crescent::storage {

// Tokens are hashed as they lie in memory, which is their little-endian encoding only here.
static_assert(std::endian::native == std::endian::little, "block keys hash little-endian tokens");

namespace {

constexpr char chain_step_tag = 0x01;

} // namespace

block_key chain_key(const block_key& parent, std::span<const uint32_t> tokens) {
  std::array<char, 17> head{};
  head[0] = chain_step_tag;
  store_be(parent, head.data() + 1);
  return sha256_key({std::as_bytes(std::span{head}), std::as_bytes(tokens)});
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
