#include "transport/memory_location.hpp"

#include "messages/errors.hpp"

#include <charconv>

namespace crescent::transport {

std::string to_string(const memory_location& where) {
  return std::string{where.is_gpu() ? "cuda:" : "cpu:"} + std::to_string(where.device);
}

caf::expected<memory_location> parse_location(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "memory location \"" + std::string{text.substr(0, 64)} + "\": " + why);
  };
  const auto colon = text.find(':');
  const auto name = text.substr(0, colon);
  memory_location out;
  if (name == "cpu")
    out.kind = memory_kind::cpu;
  else if (name == "cuda")
    out.kind = memory_kind::cuda;
  else
    return bad("the kind must be cpu or cuda");
  if (colon == std::string_view::npos)
    return out;
  const auto index = text.substr(colon + 1);
  // from_chars takes no sign, spaces or base prefixes: "+1", " 1" and "0x1" are refused.
  if (index.empty() || index.size() > 4)
    return bad("the device index must be a decimal number in [0, " +
               std::to_string(memory_location::device_max) + "]");
  int32_t device = 0;
  const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), device);
  if (ec != std::errc{} || end != index.data() + index.size() || device < 0 ||
      device > memory_location::device_max)
    return bad("the device index must be a decimal number in [0, " +
               std::to_string(memory_location::device_max) + "]");
  out.device = device;
  return out;
}

} // namespace crescent::transport
