// HTML text back to plain text: the five entities apps/serve/status_page.cpp's html_escape
// writes (and Chromium's serializer too).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace crescent::testing {

inline std::string html_unescape(std::string s) {
  static const std::vector<std::pair<std::string, std::string>> entities{
      {"&quot;", "\""}, {"&#39;", "'"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities) {
    size_t at = 0;
    while ((at = s.find(from, at)) != std::string::npos) {
      s.replace(at, from.size(), to);
      at += to.size();
    }
  }
  return s;
}

} // namespace crescent::testing
