// The checksum recorded for every stored block and verified before its bytes reach an engine.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace crescent::storage {

inline uint64_t block_checksum(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

} // namespace crescent::storage
