// Block keys: the identity of a KV block in the pool.
//
// A prompt is cut into blocks of block_tokens tokens. The key of block i hashes its tokens with
// the key of block i - 1 as seed, so it stands for the whole prefix 0..i: two prompts share key
// i exactly when they share their first (i + 1) * block_tokens tokens (up to hash collisions of
// xxh3-64). The chain starts from a root that fingerprints the model, so different models never
// share keys.
//
// A partial last block has a key too, over its fewer tokens: it is stored and reused like any
// other (an identical prompt reuses all of it), and since a hash over fewer tokens is a hash of
// a different input, it never stands for the full block that a longer prompt has there. The
// Mooncake traces hash such partial blocks as well, and the paper's hit rates count them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace crescent::storage {

/// The key of the block holding `tokens`, which follows the block keyed `parent_key`.
uint64_t chain_key(uint64_t parent_key, std::span<const uint32_t> tokens);

/// Keys of every block of `tokens`, in order: ceil(size / block_tokens) of them, the last one
/// over a partial block when block_tokens does not divide the size.
std::vector<uint64_t> chain_block_keys(std::span<const uint32_t> tokens, uint32_t block_tokens,
                                       uint64_t root_key);

} // namespace crescent::storage
