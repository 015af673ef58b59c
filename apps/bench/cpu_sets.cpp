// Where the processes of `bench transfer` run (cpu_sets.hpp): topology, the split, pinning.
#include "apps/bench/cpu_sets.hpp"

#include "messages/errors.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>

namespace crescent::bench {

namespace {

std::optional<uint32_t> read_topology(uint32_t cpu, const char* file) {
  std::ifstream in{"/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + file};
  long value = 0; // physical_package_id is -1 where the firmware does not say
  if (!(in >> value) || value < 0 || value >= long{UINT32_MAX})
    return std::nullopt;
  return static_cast<uint32_t>(value);
}

// Whole cores in two halves; the CPUs of one core stay together.
process_cpus split_by_core(const std::vector<cpu_place>& allowed) {
  std::map<std::pair<uint32_t, uint32_t>, cpu_list> cores; // in order of package, then core
  for (const auto& p : allowed)
    cores[{p.package, p.core}].push_back(p.cpu);
  process_cpus out;
  size_t index = 0;
  for (auto& [where, cpus] : cores) {
    auto& half = index++ < (cores.size() + 1) / 2 ? out.client : out.peer;
    half.insert(half.end(), cpus.begin(), cpus.end());
  }
  std::sort(out.client.begin(), out.client.end());
  std::sort(out.peer.begin(), out.peer.end());
  return out;
}

caf::expected<process_cpus> explicit_cpus(std::string_view spec, const cpu_list& allowed) {
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos)
    return make_error(errc::invalid_argument,
                      "\"" + std::string{spec} +
                          "\": expected auto, none or CLIENT:PEER (two CPU lists, as 0:1)");
  process_cpus out;
  for (auto [list, text] : {std::pair{&out.client, spec.substr(0, colon)},
                            std::pair{&out.peer, spec.substr(colon + 1)}}) {
    auto cpus = parse_cpu_list(text);
    if (!cpus)
      return std::move(cpus.error());
    for (auto cpu : *cpus)
      if (!std::binary_search(allowed.begin(), allowed.end(), cpu))
        return make_error(errc::invalid_argument, "CPU " + std::to_string(cpu) +
                                                      " is not one this process may use (" +
                                                      to_text(allowed) + ")");
    *list = std::move(*cpus);
  }
  for (auto cpu : out.client)
    if (std::binary_search(out.peer.begin(), out.peer.end(), cpu))
      return make_error(errc::invalid_argument,
                        "CPU " + std::to_string(cpu) +
                            " is in both lists: the processes run apart (--cpus none lets the "
                            "kernel place them)");
  return out;
}

} // namespace

std::vector<cpu_place> places_of(const cpu_list& cpus) {
  std::vector<cpu_place> out;
  out.reserve(cpus.size());
  for (auto cpu : cpus) {
    const auto core = read_topology(cpu, "core_id");
    if (!core)
      out.push_back({cpu, unknown_package, cpu});
    else
      out.push_back({cpu, read_topology(cpu, "physical_package_id").value_or(0), *core});
  }
  return out;
}

caf::expected<process_cpus> choose_cpus(std::string_view spec,
                                        const std::vector<cpu_place>& allowed) {
  cpu_list cpus;
  for (const auto& p : allowed)
    cpus.push_back(p.cpu);
  std::sort(cpus.begin(), cpus.end());
  if (spec == "none" || (spec == "auto" && cpus.size() < 2))
    return process_cpus{};
  if (spec != "auto")
    return explicit_cpus(spec, cpus);
  auto by_core = split_by_core(allowed);
  if (!by_core.peer.empty())
    return by_core;
  const auto half = static_cast<std::ptrdiff_t>((cpus.size() + 1) / 2); // one core, its threads
  return process_cpus{{cpus.begin(), cpus.begin() + half}, {cpus.begin() + half, cpus.end()}};
}

caf::error pin_this_thread(const cpu_list& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (auto cpu : cpus) {
    if (cpu >= cpu_count_max) // CPU_SET would drop it without a word
      return make_error(errc::invalid_argument, "CPU " + std::to_string(cpu) +
                                                    " is past the last (" +
                                                    std::to_string(cpu_count_max - 1) + ")");
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    return make_error(errc::io_error, "cannot run on CPUs " + to_text(cpus) +
                                          ": sched_setaffinity: " + std::strerror(errno));
  return {};
}

caf::expected<process_cpus> place_this_process(std::string_view spec) {
  if (spec == "none") // no system call: nothing to learn or to change
    return process_cpus{};
  auto allowed = allowed_cpus();
  if (!allowed)
    return std::move(allowed.error());
  auto cpus = choose_cpus(spec, places_of(*allowed));
  if (!cpus)
    return cpus;
  if (!cpus->client.empty())
    if (auto err = pin_this_thread(cpus->client))
      return err;
  return cpus;
}

} // namespace crescent::bench
