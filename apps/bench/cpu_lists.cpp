// CPU lists of `--cpus` (cpu_sets.hpp): "0-3,8" and back.
#include "apps/bench/cpu_sets.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <charconv>

namespace crescent::bench {

namespace {

caf::error list_error(std::string_view whole, const std::string& what) {
  return make_error(errc::invalid_argument, "CPU list \"" + std::string{whole} + "\": " + what);
}

caf::expected<uint32_t> parse_cpu(std::string_view text, std::string_view whole) {
  uint64_t cpu = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpu);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
    return list_error(whole, "\"" + std::string{text} + "\" is not a CPU number");
  if (ec == std::errc::result_out_of_range || cpu >= cpu_count_max)
    return list_error(whole, "CPU " + std::string{text} + " is past the last (" +
                                 std::to_string(cpu_count_max - 1) + ")");
  return static_cast<uint32_t>(cpu);
}

// One item: "N" or "N-M".
caf::error parse_item(std::string_view item, std::string_view whole, cpu_list& out) {
  const auto dash = item.find('-');
  if (dash != std::string_view::npos && (dash == 0 || dash + 1 == item.size()))
    return list_error(whole, "range \"" + std::string{item} + "\" lacks " +
                                 (dash == 0 ? "its first CPU" : "its last CPU"));
  auto first = parse_cpu(item.substr(0, dash), whole);
  if (!first)
    return first.error();
  auto last = dash == std::string_view::npos ? first : parse_cpu(item.substr(dash + 1), whole);
  if (!last)
    return last.error();
  if (*last < *first)
    return list_error(whole, "range \"" + std::string{item} + "\" runs backwards");
  for (uint32_t cpu = *first; cpu <= *last; ++cpu)
    out.push_back(cpu);
  return {};
}

} // namespace

caf::expected<cpu_list> parse_cpu_list(std::string_view text) {
  cpu_list out;
  size_t at = 0;
  for (;;) {
    const auto comma = text.find(',', at);
    const auto item = text.substr(at, comma == std::string_view::npos ? text.npos : comma - at);
    if (auto err = parse_item(item, text, out))
      return err;
    if (comma == std::string_view::npos)
      break;
    at = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string to_text(const cpu_list& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!out.empty())
      out += ',';
    out += std::to_string(cpus[i]);
    if (j > i)
      out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

} // namespace crescent::bench
