#include "apps/replay/trace.hpp"

#include "messages/errors.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>

namespace crescent::replay {

namespace {

using json = nlohmann::json;

caf::error line_error(const std::string& source, uint64_t line, const std::string& what) {
  return make_error(errc::bad_trace, source + ":" + std::to_string(line) + ": " + what);
}

// An integer field in [min, max]; JSON floats with a fractional part are refused.
caf::expected<uint64_t> read_uint(const json& obj, const char* field, uint64_t min, uint64_t max,
                                  const std::string& source, uint64_t line) {
  auto i = obj.find(field);
  if (i == obj.end())
    return line_error(source, line, std::string{field} + ": missing");
  uint64_t value = 0;
  if (i->is_number_unsigned()) {
    value = i->get<uint64_t>();
  } else if (i->is_number_float()) {
    double d = i->get<double>();
    if (d < 0 || d != static_cast<double>(static_cast<uint64_t>(d)))
      return line_error(source, line, std::string{field} + ": expected a non-negative integer");
    value = static_cast<uint64_t>(d);
  } else {
    return line_error(source, line, std::string{field} + ": expected a non-negative integer");
  }
  if (value < min || value > max)
    return line_error(source, line,
                      std::string{field} + ": " + std::to_string(value) + " is not in [" +
                          std::to_string(min) + ", " + std::to_string(max) + "]");
  return value;
}

} // namespace

caf::expected<trace_record> parse_trace_line(std::string_view text, uint64_t line,
                                             const std::string& source) {
  if (text.size() > trace_line_bytes_max)
    return line_error(source, line, "line longer than 4 MiB");
  json obj = json::parse(text, nullptr, false);
  if (obj.is_discarded())
    return line_error(source, line, "not valid JSON");
  if (!obj.is_object())
    return line_error(source, line, "expected a JSON object");
  trace_record r;
  r.line = line;
  auto ts = read_uint(obj, "timestamp", 0, std::numeric_limits<uint32_t>::max(), source, line);
  auto in = read_uint(obj, "input_length", 1, trace_input_tokens_max, source, line);
  auto out = read_uint(obj, "output_length", 0, trace_output_tokens_max, source, line);
  for (auto* v : {&ts, &in, &out})
    if (!*v)
      return std::move(v->error());
  r.timestamp_ms = *ts;
  r.input_tokens = static_cast<uint32_t>(*in);
  r.output_tokens = static_cast<uint32_t>(*out);
  auto ids = obj.find("hash_ids");
  if (ids == obj.end() || !ids->is_array())
    return line_error(source, line, "hash_ids: expected an array of block ids");
  const size_t blocks = (r.input_tokens + trace_block_tokens - 1) / trace_block_tokens;
  if (ids->size() != blocks)
    return line_error(
        source, line,
        "hash_ids: " + std::to_string(ids->size()) + " ids for " + std::to_string(r.input_tokens) +
            " input tokens; expected one per 512-token block (" + std::to_string(blocks) + ")");
  r.hash_ids.reserve(blocks);
  for (const auto& id : *ids) {
    if (!id.is_number_unsigned())
      return line_error(source, line, "hash_ids: expected non-negative integers");
    r.hash_ids.push_back(id.get<uint64_t>());
  }
  return r;
}

caf::expected<std::vector<trace_record>> read_trace(const std::string& path, size_t limit) {
  std::ifstream in{path};
  if (!in)
    return make_error(errc::bad_trace, "cannot read trace file " + path);
  std::vector<trace_record> out;
  std::string text;
  uint64_t line = 0;
  while ((limit == 0 || out.size() < limit) && std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    auto r = parse_trace_line(text, line, path);
    if (!r)
      return std::move(r.error());
    out.push_back(std::move(*r));
  }
  if (in.bad())
    return make_error(errc::io_error, "error reading trace file " + path);
  if (out.empty())
    return make_error(errc::bad_trace, path + ": no trace records");
  return out;
}

} // namespace crescent::replay
