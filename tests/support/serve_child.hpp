// A `crescent serve` child process on 127.0.0.1 and any free port, for the tests that ask it
// over HTTP (tests/system/serve_test.cpp, status_page_test.cpp), and the helpers they share.
#pragma once

#include "apps/bench/child_process.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace crescent::testing {

struct serve_child {
  std::optional<bench::child_process> process;
  int port = 0;

  explicit serve_child(std::vector<std::string> extra = {}) {
    using namespace std::chrono_literals;
    std::vector<std::string> args{"serve", "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = bench::child_process::spawn(CRESCENT_BINARY, args);
    if (!p) {
      ADD_FAILURE() << describe(p.error());
      return;
    }
    process.emplace(std::move(*p));
    auto line = process->read_line(60s);
    if (!line) {
      ADD_FAILURE() << "no listening line: " << describe(line.error());
      return;
    }
    const auto at = line->rfind(':');
    port = std::atoi(line->c_str() + at + 1);
    EXPECT_GT(port, 0) << *line;
  }

  httplib::Client client() const {
    httplib::Client c{"127.0.0.1", port};
    c.set_read_timeout(60, 0);
    return c;
  }

  ~serve_child() {
    using namespace std::chrono_literals;
    if (process) {
      process->signal(SIGTERM);
      auto status = process->wait_exit(30s);
      EXPECT_TRUE(status && *status == 0) << "serve did not stop cleanly on SIGTERM";
    }
  }
};

inline nlohmann::json completion_body(const std::string& prompt, int max_tokens, bool stream) {
  return {{"model", "crescent-reference"},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"stream", stream}};
}

/// The value of one series in a /metrics text, as written there (nullopt: absent).
inline std::optional<std::string> metric_text(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos)
    return std::nullopt;
  const auto from = at + series.size() + 2;
  return text.substr(from, text.find('\n', from) - from);
}

/// One series' value in a /metrics text (-1: absent).
inline double metric(const std::string& text, const std::string& series) {
  auto v = metric_text(text, series);
  return v ? std::atof(v->c_str()) : -1;
}

} // namespace crescent::testing
