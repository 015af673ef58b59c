// Block keys: the identity of a KV block in the pool.
//
// A prompt is cut into blocks of block_tokens tokens. The key of block i is the first 128 bits
// of SHA-256 over the key of block i - 1 and the block's tokens, so it stands for the whole
// prefix 0..i: two prompts share key i exactly when they share their first (i + 1) * block_tokens
// tokens, up to a SHA-256 collision. The chain starts from a root over everything that makes a
// KV page's bytes, the KV layout's version included (gpu::model_config::key_root), so different
// models or layouts never share keys.
//
// Why SHA-256 and not a keyed hash: a tenant chooses its prompt's tokens, so with a 64-bit
// non-cryptographic hash (xxh3, as before) a crafted prompt could be made to collide with
// another tenant's prefix and read its KV. Finding two prefixes with one 128-bit SHA-256 key
// takes about 2^64 hashes. A keyed hash would do as well but needs a secret shared by every
// node and kept across restarts (RocksDB records, SSD blocks); this needs none. vLLM made the
// same move to SHA-256 prefix hashes.
//
// Inputs are domain-separated by their first byte: 0x01 for a chain step, 0x00 for the root's
// record (gpu/model_config.cpp), so no chain input can reproduce a root.
//
// A partial last block has a key too, over its fewer tokens: it is stored and reused like any
// other (an identical prompt reuses all of it), and since a hash over fewer tokens is a hash of
// a different input, it never stands for the full block that a longer prompt has there. The
// Mooncake traces hash such partial blocks as well, and the paper's hit rates count them.
#pragma once

#include "messages/block_key.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace crescent::storage {

/// The key of the block holding `tokens`, which follows the block keyed `parent`: SHA-256 of
/// 0x01, parent (hi then lo, big-endian) and the tokens (each little-endian).
block_key chain_key(const block_key& parent, std::span<const uint32_t> tokens);

/// Keys of every block of `tokens`, in order: ceil(size / block_tokens) of them, the last one
/// over a partial block when block_tokens does not divide the size.
std::vector<block_key> chain_block_keys(std::span<const uint32_t> tokens, uint32_t block_tokens,
                                        const block_key& root);

} // namespace crescent::storage
