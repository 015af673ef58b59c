// Where a registered region's (or an operation's local buffer's) bytes live: host memory, or
// the memory of one CUDA device. Written "cpu:0" and "cuda:1", as in Mooncake's API.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace crescent::transport {

enum class memory_kind : uint8_t { cpu, cuda };

struct memory_location {
  /// Device indices above this are refused when parsing (no machine has that many GPUs).
  static constexpr int32_t device_max = 1023;

  memory_kind kind = memory_kind::cpu;
  // cpu: the NUMA node (recorded, not used yet); cuda: the device's ordinal in this process
  // (as CUDA_VISIBLE_DEVICES numbers them).
  int32_t device = 0;

  static constexpr memory_location cpu(int32_t numa_node = 0) {
    return {memory_kind::cpu, numa_node};
  }
  static constexpr memory_location cuda(int32_t device) { return {memory_kind::cuda, device}; }

  constexpr bool is_gpu() const { return kind == memory_kind::cuda; }

  friend bool operator==(const memory_location&, const memory_location&) = default;
};

/// "cpu:0", "cuda:1".
std::string to_string(const memory_location& where);

/// Parses "cpu", "cpu:N", "cuda" or "cuda:N" (N decimal, 0..device_max; no index means 0).
/// invalid_argument, saying what is wrong, for anything else.
caf::expected<memory_location> parse_location(std::string_view text);

} // namespace crescent::transport
