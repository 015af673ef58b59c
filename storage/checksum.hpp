// The checksum recorded for every stored block and verified before its bytes reach an engine:
// XXH3-64 (messages/xxh3.hpp).
#pragma once

#include "messages/xxh3.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace crescent::storage {

inline uint64_t block_checksum(std::span<const std::byte> bytes) {
  return xxh3_64(bytes.data(), bytes.size());
}

} // namespace crescent::storage
