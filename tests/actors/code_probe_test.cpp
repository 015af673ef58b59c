// Code probes (actors/common/code_probe.hpp): counted as hit, and listed exactly as the sources
// mark them.
#include "actors/common/code_probe.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace crescent {
namespace {

size_t index_of(std::string_view name) {
  for (size_t i = 0; i < std::size(code_probes); ++i)
    if (code_probes[i].name == name)
      return i;
  return std::size(code_probes);
}

TEST(code_probe, a_hit_is_counted_for_its_probe_alone_until_reset) {
  reset_probes();
  const auto i = index_of("owner.victim_steps_aside");
  ASSERT_LT(i, std::size(code_probes));
  CRESCENT_PROBE("owner.victim_steps_aside");
  CRESCENT_PROBE("owner.victim_steps_aside");
  auto hits = probe_hits();
  ASSERT_EQ(hits.size(), std::size(code_probes));
  for (size_t k = 0; k < hits.size(); ++k)
    EXPECT_EQ(hits[k], k == i ? 2u : 0u) << code_probes[k].name;
  reset_probes();
  for (auto h : probe_hits())
    EXPECT_EQ(h, 0u);
}

// Every CRESCENT_PROBE("name") of the sources, by name, with where it is.
std::map<std::string, std::vector<std::string>> probes_in_sources() {
  namespace fs = std::filesystem;
  std::map<std::string, std::vector<std::string>> out;
  const std::string mark = "CRESCENT_PROBE(\"";
  for (const char* dir : {"actors", "apps", "gpu", "messages", "storage", "transport"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path{CRESCENT_SOURCE_DIR} / dir)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp"))
        continue;
      std::ifstream in{e.path()};
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      for (auto at = s.find(mark); at != std::string::npos; at = s.find(mark, at + 1)) {
        const auto begin = at + mark.size();
        out[s.substr(begin, s.find('"', begin) - begin)].push_back(e.path().string());
      }
    }
  return out;
}

TEST(code_probe, the_list_names_every_probe_the_sources_mark_and_no_other) {
  const auto marked = probes_in_sources();
  std::set<std::string> listed;
  for (const auto& p : code_probes) {
    EXPECT_TRUE(listed.insert(std::string{p.name}).second) << "listed twice: " << p.name;
    EXPECT_FALSE(p.marks.empty()) << p.name;
  }
  for (const auto& [name, where] : marked) {
    EXPECT_TRUE(listed.count(name))
        << "marked but not listed in code_probes: " << name << " (" << where.front() << ")";
    EXPECT_EQ(where.size(), 1u) << "marked in more than one place: " << name;
  }
  for (const auto& name : listed)
    EXPECT_TRUE(marked.count(name)) << "listed, but no source marks it: " << name;
}

} // namespace
} // namespace crescent
