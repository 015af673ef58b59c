// GET / of `crescent serve`: a small, self-contained HTML status page (no script, no external
// asset; it reloads itself every few seconds). It shows the cluster (nodes, their instances and
// pools), each instance's queue and load, the requests by outcome, the prefix hit rate and the
// recent TTFT and TBT quantiles.
//
// Its numbers are those /metrics shows, taken from the same door_numbers and cluster_numbers:
// each number's element carries data-series (the /metrics series it is, as written there) and
// data-value (its value, as written there), so that a reader, or a test, can check the page
// against a scrape. Derived numbers (the hit rate) carry an id and data-value.
#pragma once

#include "apps/serve/metrics.hpp"

#include <string>
#include <string_view>

namespace crescent {
struct cluster_config;
}

namespace crescent::serve {

struct status_inputs {
  std::string_view model;
  const cluster_config* config = nullptr;
  door_numbers door;
  cluster_numbers cluster;
  unsigned refresh_s = 5; // the page reloads itself this often (0: never)
};

/// The page, as one HTML document.
std::string status_page(const status_inputs& in);

/// Text with &, <, >, " and ' escaped for HTML content and attribute values.
std::string html_escape(std::string_view text);

} // namespace crescent::serve
