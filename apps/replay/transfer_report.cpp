#include "apps/replay/transfer_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace crescent::replay {

namespace {

std::string bytes_text(uint64_t bytes) {
  if (bytes < (1u << 10))
    return fmt::format("{} B", bytes);
  if (bytes < (1u << 20))
    return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1u << 10));
  if (bytes < (1ull << 30))
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1u << 20));
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
}

} // namespace

std::string format_transfer_metrics(std::vector<transport::path_metrics> paths) {
  // An operation counts on its first path; its slices, bytes, retries and failures on the path
  // that handled them (a later one, when the first gave way): a path is idle only if all are 0.
  std::erase_if(paths, [](const auto& p) {
    return p.operations == 0 && p.slices == 0 && p.bytes_read == 0 && p.bytes_written == 0 &&
           p.retries == 0 && p.failures == 0;
  });
  if (paths.empty())
    return "KV moved      nothing through the transfer engine\n";
  std::sort(paths.begin(), paths.end(), [](const auto& a, const auto& b) {
    const uint64_t ab = a.bytes_read + a.bytes_written, bb = b.bytes_read + b.bytes_written;
    return ab != bb ? ab > bb : std::tie(a.backend, a.node) < std::tie(b.backend, b.node);
  });
  std::string out;
  for (size_t i = 0; i < paths.size(); ++i) {
    const auto& p = paths[i];
    out += fmt::format("{:<14}{} to node {}: {} written, {} read; {} operations, {} slices, "
                       "{} retries, {} failures\n",
                       i == 0 ? "KV moved" : "", p.backend, p.node, bytes_text(p.bytes_written),
                       bytes_text(p.bytes_read), p.operations, p.slices, p.retries, p.failures);
  }
  return out;
}

} // namespace crescent::replay
