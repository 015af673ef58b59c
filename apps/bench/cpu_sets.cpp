#include "apps/bench/cpu_sets.hpp"

#include "messages/errors.hpp"

#include <sched.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace crescent::bench {

namespace {

caf::expected<uint32_t> parse_cpu(std::string_view text, std::string_view whole) {
  uint32_t cpu = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpu);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    return make_error(errc::invalid_argument, "CPU list \"" + std::string{whole} + "\": \"" +
                                                  std::string{text} + "\" is not a CPU number");
  if (cpu >= cpu_count_max)
    return make_error(errc::invalid_argument, "CPU list \"" + std::string{whole} + "\": CPU " +
                                                  std::to_string(cpu) + " is past the last (" +
                                                  std::to_string(cpu_count_max - 1) + ")");
  return cpu;
}

caf::error check_allowed(const cpu_list& cpus, const cpu_list& allowed) {
  for (auto cpu : cpus)
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu))
      return make_error(errc::invalid_argument, "CPU " + std::to_string(cpu) +
                                                    " is not one this process may use (" +
                                                    to_text(allowed) + ")");
  return {};
}

} // namespace

caf::expected<cpu_list> parse_cpu_list(std::string_view text) {
  cpu_list out;
  std::string_view rest = text;
  while (!rest.empty() || out.empty()) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto dash = item.find('-');
    auto first = parse_cpu(item.substr(0, dash), text);
    if (!first)
      return std::move(first.error());
    auto last = dash == std::string_view::npos ? first : parse_cpu(item.substr(dash + 1), text);
    if (!last)
      return std::move(last.error());
    if (*last < *first)
      return make_error(errc::invalid_argument, "CPU list \"" + std::string{text} + "\": range \"" +
                                                    std::string{item} + "\" runs backwards");
    for (uint32_t cpu = *first; cpu <= *last; ++cpu)
      out.push_back(cpu);
    if (comma != std::string_view::npos && rest.empty())
      return make_error(errc::invalid_argument,
                        "CPU list \"" + std::string{text} + "\" ends with a comma");
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

caf::expected<process_cpus> choose_cpus(std::string_view spec, const cpu_list& allowed) {
  if (spec == "none")
    return process_cpus{};
  if (spec == "auto") {
    if (allowed.size() < 2)
      return process_cpus{};
    const auto half = static_cast<std::ptrdiff_t>((allowed.size() + 1) / 2);
    return process_cpus{{allowed.begin(), allowed.begin() + half},
                        {allowed.begin() + half, allowed.end()}};
  }
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos)
    return make_error(errc::invalid_argument,
                      "--cpus \"" + std::string{spec} +
                          "\": expected auto, none or CLIENT:PEER (two CPU lists, as 0:1)");
  process_cpus out;
  for (auto [list, text] : {std::pair{&out.client, spec.substr(0, colon)},
                            std::pair{&out.peer, spec.substr(colon + 1)}}) {
    auto cpus = parse_cpu_list(text);
    if (!cpus)
      return std::move(cpus.error());
    if (auto err = check_allowed(*cpus, allowed))
      return err;
    *list = std::move(*cpus);
  }
  return out;
}

caf::expected<cpu_list> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return make_error(errc::io_error, std::string{"sched_getaffinity: "} + std::strerror(errno));
  cpu_list out;
  for (uint32_t cpu = 0; cpu < cpu_count_max; ++cpu)
    if (CPU_ISSET(cpu, &set))
      out.push_back(cpu);
  return out;
}

caf::error pin_this_thread(const cpu_list& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (auto cpu : cpus) {
    assert(cpu < cpu_count_max); // parse_cpu_list() and allowed_cpus() keep it so
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    return make_error(errc::io_error, "cannot run on CPUs " + to_text(cpus) +
                                          ": sched_setaffinity: " + std::strerror(errno));
  return {};
}

} // namespace crescent::bench
