#include "storage/block_key.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cassert>

namespace crescent::storage {

uint64_t chain_key(uint64_t parent_key, std::span<const uint32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_key);
}

std::vector<uint64_t> chain_block_keys(std::span<const uint32_t> tokens, uint32_t block_tokens,
                                       uint64_t root_key) {
  assert(block_tokens > 0);
  std::vector<uint64_t> keys;
  keys.reserve((tokens.size() + block_tokens - 1) / block_tokens);
  uint64_t parent = root_key;
  for (size_t begin = 0; begin < tokens.size(); begin += block_tokens) {
    const size_t n = std::min<size_t>(block_tokens, tokens.size() - begin);
    parent = chain_key(parent, tokens.subspan(begin, n));
    keys.push_back(parent);
  }
  return keys;
}

} // namespace crescent::storage
