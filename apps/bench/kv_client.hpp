// What `crescent bench store` measures: one client connection to a key-value store, holding
// whole values by a 64-bit key. Crescent's pool and the baselines (memcached, Redis) all sit
// behind it, so every system runs the very same loop.
#pragma once

#include "messages/block_key.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace crescent::bench {

class kv_client {
 public:
  virtual ~kv_client() = default;

  /// Stores `value` under `key`; returns once the store acknowledged it.
  virtual caf::error put(block_key key, std::span<const std::byte> value) = 0;

  /// Reads the value of `key` into `out` (exactly its size); false: a miss.
  virtual caf::expected<bool> get(block_key key, std::span<std::byte> out) = 0;
};

/// Opens one more connection (one per client thread).
using kv_client_factory = std::function<caf::expected<std::unique_ptr<kv_client>>()>;

} // namespace crescent::bench
