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

// The probe's index in code_probes; probe_count for a name it does not list.
size_t index_of(std::string_view name) {
  size_t i = 0;
  while (i < probe_count && code_probes[i].name != name)
    ++i;
  return i;
}

} // namespace

void hit_probe(std::string_view name) {
  const size_t i = index_of(name);
  assert(i < probe_count && "a probe that code_probes does not list");
  if (i < probe_count)
    counters()[i].fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> probe_hits() {
  std::vector<uint64_t> out;
  out.reserve(probe_count);
  for (const auto& c : counters())
    out.push_back(c.load(std::memory_order_relaxed));
  return out;
}

uint64_t probe_hits(std::string_view name) {
  const size_t i = index_of(name);
  return i < probe_count ? counters()[i].load(std::memory_order_relaxed) : 0;
}

void reset_probes() {
  for (auto& c : counters())
    c.store(0, std::memory_order_relaxed);
}

} // namespace crescent
