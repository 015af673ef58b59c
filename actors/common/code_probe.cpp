#include "actors/common/code_probe.hpp"

#include <array>
#include <atomic>
#include <cassert>

namespace crescent {

namespace {

constexpr size_t probe_count = std::size(code_probes);

std::array<std::atomic<uint64_t>, probe_count>& counters() {
  static std::array<std::atomic<uint64_t>, probe_count> hits{};
  return hits;
}

} // namespace

void hit_probe(std::string_view name) {
  for (size_t i = 0; i < probe_count; ++i)
    if (code_probes[i].name == name) {
      counters()[i].fetch_add(1, std::memory_order_relaxed);
      return;
    }
  assert(!"a probe that code_probes does not list");
}

std::vector<uint64_t> probe_hits() {
  std::vector<uint64_t> out;
  out.reserve(probe_count);
  for (const auto& c : counters())
    out.push_back(c.load(std::memory_order_relaxed));
  return out;
}

uint64_t probe_hits(std::string_view name) {
  for (size_t i = 0; i < probe_count; ++i)
    if (code_probes[i].name == name)
      return counters()[i].load(std::memory_order_relaxed);
  return 0;
}

void reset_probes() {
  for (auto& c : counters())
    c.store(0, std::memory_order_relaxed);
}

} // namespace crescent
