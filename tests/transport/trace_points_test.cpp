// The trace points' ring (transport/trace_points.hpp): events from several threads, each kept
// once, in the order of their slots; past its capacity, counted and dropped; written as text.
#include "transport/trace_points.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace crescent::transport::trace {
namespace {

TEST(trace_points, a_ring_keeps_every_event_up_to_its_capacity_and_counts_the_rest) {
  auto r = std::make_unique<ring>();
  constexpr int threads = 4;
  constexpr uint64_t each = ring::capacity / threads + 10;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (uint64_t i = 0; i < each; ++i)
        r->record(point::request_read, t * each + i);
    });
  for (auto& w : workers)
    w.join();
  ASSERT_EQ(r->size(), ring::capacity);
  EXPECT_EQ(r->dropped(), threads * each - ring::capacity);
  std::set<uint64_t> values;
  for (size_t i = 0; i < r->size(); ++i) {
    EXPECT_EQ(r->at(i).tag, point::request_read);
    EXPECT_GT(r->at(i).nanoseconds, 0u);
    values.insert(r->at(i).value);
  }
  EXPECT_EQ(values.size(), ring::capacity) << "an event kept twice, or one overwritten";
}

TEST(trace_points, a_ring_is_written_one_event_a_line) {
  ring r;
  r.record(point::submitted, 7);
  r.record(point::acks_sent, 16);
  const std::string path = ::testing::TempDir() + "trace_points_test." + std::to_string(getpid());
  ASSERT_FALSE(r.write(path));
  std::ifstream in{path};
  unsigned long long ns = 0, value = 0;
  char tag = 0;
  int cpu = -2;
  ASSERT_TRUE(in >> ns >> tag >> value >> cpu);
  EXPECT_EQ(ns, r.at(0).nanoseconds);
  EXPECT_EQ(tag, 'S');
  EXPECT_EQ(value, 7u);
  EXPECT_GE(cpu, 0);
  ASSERT_TRUE(in >> ns >> tag >> value >> cpu);
  EXPECT_EQ(tag, 'k');
  EXPECT_EQ(value, 16u);
  EXPECT_FALSE(in >> ns);
  std::remove(path.c_str());
  EXPECT_TRUE(r.write("/nonexistent-directory/trace.txt")) << "an error, not a silent loss";
}

} // namespace
} // namespace crescent::transport::trace
