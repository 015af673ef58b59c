// Mooncake trace files: one JSON object per line with `timestamp` (ms since the start),
// `input_length` and `output_length` (tokens), and `hash_ids` (one id per 512-token block of
// the prompt; equal ids at equal positions mean a shared prefix).
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace crescent::replay {

struct trace_record {
  uint64_t line = 0; // 1-based line in the file
  uint64_t timestamp_ms = 0;
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  std::vector<uint64_t> hash_ids;
};

inline constexpr uint32_t trace_block_tokens = 512;
inline constexpr size_t trace_line_bytes_max = 4u << 20;
inline constexpr uint32_t trace_input_tokens_max = 16u << 20;
inline constexpr uint32_t trace_output_tokens_max = 1u << 20;

/// Parses one line. Errors name the line and the field: "trace.jsonl:17: input_length: ...".
caf::expected<trace_record> parse_trace_line(std::string_view text, uint64_t line,
                                             const std::string& source);

/// Reads the first `limit` records of a file (0: all). Blank lines are skipped; the first bad
/// line is an error.
caf::expected<std::vector<trace_record>> read_trace(const std::string& path, size_t limit);

} // namespace crescent::replay
