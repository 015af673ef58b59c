// `crescent bench transfer --cpus`: CPU lists, how the two processes split the CPUs, and
// pinning (cli_test.cpp checks where both processes of a real run end up).
#include "apps/bench/cpu_sets.hpp"

#include "messages/errors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

namespace crescent::bench {
namespace {

// CPUs each a core of its own, in package 0.
std::vector<cpu_place> cores(const cpu_list& cpus) {
  std::vector<cpu_place> out;
  for (auto cpu : cpus)
    out.push_back({cpu, 0, cpu});
  return out;
}

TEST(cpu_sets, lists_parse_sorted_and_unique) {
  EXPECT_EQ(parse_cpu_list("3"), (cpu_list{3}));
  EXPECT_EQ(parse_cpu_list("0-3,8"), (cpu_list{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("8,2-3,3,0"), (cpu_list{0, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("1023"), (cpu_list{1023}));
  auto all = parse_cpu_list("0-1023");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), cpu_count_max);
}

TEST(cpu_sets, a_bad_list_is_refused_with_what_is_wrong) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"", "\"\" is not a CPU number"},
      {",", "\"\" is not a CPU number"},
      {"0,", "\"\" is not a CPU number"},
      {",0", "\"\" is not a CPU number"},
      {"0,,1", "\"\" is not a CPU number"},
      {"a", "\"a\" is not a CPU number"},
      {" 1", "\" 1\" is not a CPU number"},
      {"1.5", "\"1.5\" is not a CPU number"},
      {"1024x", "\"1024x\" is not a CPU number"},
      {"0-", "range \"0-\" lacks its last CPU"},
      {"-1", "range \"-1\" lacks its first CPU"},
      {"0-7:2", "\"7:2\" is not a CPU number"},
      {"3-1", "range \"3-1\" runs backwards"},
      {"1024", "CPU 1024 is past the last (1023)"},
      {"0-1024", "CPU 1024 is past the last (1023)"},
      {"99999999999999999999", "CPU 99999999999999999999 is past the last (1023)"},
  };
  for (auto [bad, why] : cases) {
    auto cpus = parse_cpu_list(bad);
    ASSERT_FALSE(cpus) << "\"" << bad << "\"";
    EXPECT_TRUE(is(cpus.error(), errc::invalid_argument)) << bad;
    const auto text = describe(cpus.error());
    EXPECT_NE(text.find("CPU list \"" + std::string{bad} + "\": "), std::string::npos) << text;
    EXPECT_NE(text.find(why), std::string::npos) << text;
  }
}

TEST(cpu_sets, text_reads_back_as_the_same_list) {
  for (const cpu_list& cpus :
       {cpu_list{0}, cpu_list{0, 1, 2, 3, 8}, cpu_list{1, 3, 5}, cpu_list{0, 1, 4, 5, 6, 1023}}) {
    auto back = parse_cpu_list(to_text(cpus));
    ASSERT_TRUE(back) << to_text(cpus);
    EXPECT_EQ(*back, cpus);
  }
  EXPECT_EQ(to_text({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(to_text({}), "");
}

TEST(cpu_sets, auto_gives_each_process_half_the_cores_the_client_the_larger) {
  const std::tuple<cpu_list, cpu_list, cpu_list> cases[] = {
      {{0, 1}, {0}, {1}},
      {{2, 4, 6}, {2, 4}, {6}},
      {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3}, {4, 5, 6, 7}},
      {{1, 3, 5, 7}, {1, 3}, {5, 7}},
  };
  for (const auto& [allowed, client, peer] : cases) {
    auto cpus = choose_cpus("auto", cores(allowed));
    ASSERT_TRUE(cpus) << to_text(allowed);
    EXPECT_EQ(cpus->client, client) << to_text(allowed);
    EXPECT_EQ(cpus->peer, peer) << to_text(allowed);
  }
}

// Hardware threads of one core stay in one process, and each package goes to one process: the
// usual numbering puts a core's second thread in the upper half of the CPUs.
TEST(cpu_sets, auto_keeps_a_cores_threads_together_and_splits_by_package) {
  std::vector<cpu_place> smt;
  for (uint32_t cpu = 0; cpu < 8; ++cpu)
    smt.push_back({cpu, 0, cpu % 4}); // CPUs n and n + 4 are the threads of core n
  auto by_core = choose_cpus("auto", smt);
  ASSERT_TRUE(by_core);
  EXPECT_EQ(by_core->client, (cpu_list{0, 1, 4, 5}));
  EXPECT_EQ(by_core->peer, (cpu_list{2, 3, 6, 7}));

  std::vector<cpu_place> two_packages;
  for (uint32_t cpu = 0; cpu < 8; ++cpu)
    two_packages.push_back({cpu, cpu % 2, cpu / 2}); // even CPUs on package 0, odd on 1
  auto by_package = choose_cpus("auto", two_packages);
  ASSERT_TRUE(by_package);
  EXPECT_EQ(by_package->client, (cpu_list{0, 2, 4, 6}));
  EXPECT_EQ(by_package->peer, (cpu_list{1, 3, 5, 7}));

  // One core of two threads: nothing better than a thread each.
  auto one_core = choose_cpus("auto", {{0, 0, 0}, {1, 0, 0}});
  ASSERT_TRUE(one_core);
  EXPECT_EQ(one_core->client, (cpu_list{0}));
  EXPECT_EQ(one_core->peer, (cpu_list{1}));
}

TEST(cpu_sets, auto_with_one_cpu_and_none_leave_both_to_the_kernel) {
  for (auto [spec, allowed] : {std::pair{"auto", cpu_list{3}}, std::pair{"none", cpu_list{0, 1}}}) {
    auto cpus = choose_cpus(spec, cores(allowed));
    ASSERT_TRUE(cpus) << spec;
    EXPECT_TRUE(cpus->client.empty()) << spec;
    EXPECT_TRUE(cpus->peer.empty()) << spec;
  }
  auto none = place_this_process("none");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->client.empty());
}

TEST(cpu_sets, explicit_lists_name_cpus_this_process_may_use_and_none_twice) {
  auto ok = choose_cpus("0-1:2,3", cores({0, 1, 2, 3}));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->client, (cpu_list{0, 1}));
  EXPECT_EQ(ok->peer, (cpu_list{2, 3}));
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"0:4", "CPU 4 is not one this process may use (0-3)"},
      {"4:0", "CPU 4 is not one this process may use (0-3)"},
      {"0-1:1-2", "CPU 1 is in both lists"},
      {"0", "expected auto, none or CLIENT:PEER"},
      {"fast", "expected auto, none or CLIENT:PEER"},
      {"0:", "CPU list \"\": "},
      {":1", "CPU list \"\": "},
      {"0:1:2", "CPU list \"1:2\": "},
      {"x:1", "CPU list \"x\": "},
  };
  for (auto [bad, why] : cases) {
    auto cpus = choose_cpus(bad, cores({0, 1, 2, 3}));
    ASSERT_FALSE(cpus) << bad;
    EXPECT_TRUE(is(cpus.error(), errc::invalid_argument)) << describe(cpus.error());
    EXPECT_NE(describe(cpus.error()).find(why), std::string::npos) << describe(cpus.error());
  }
}

TEST(cpu_sets, this_thread_runs_where_it_is_pinned_and_a_bad_set_is_an_error) {
  auto allowed = allowed_cpus();
  ASSERT_TRUE(allowed);
  ASSERT_FALSE(allowed->empty());
  std::thread([&] {
    ASSERT_FALSE(pin_this_thread({allowed->back()}));
    auto now = allowed_cpus();
    ASSERT_TRUE(now);
    EXPECT_EQ(*now, (cpu_list{allowed->back()}));
    auto past = pin_this_thread({cpu_count_max});
    EXPECT_TRUE(is(past, errc::invalid_argument)) << describe(past);
    // A CPU past every one this machine has: the kernel refuses, and says so.
    if (sysconf(_SC_NPROCESSORS_CONF) < cpu_count_max) {
      auto err = pin_this_thread({cpu_count_max - 1});
      EXPECT_NE(describe(err).find("sched_setaffinity"), std::string::npos) << describe(err);
    }
  }).join();
}

TEST(cpu_sets, places_come_from_sysfs_or_make_each_cpu_a_core) {
  auto allowed = allowed_cpus();
  ASSERT_TRUE(allowed);
  auto places = places_of(*allowed);
  ASSERT_EQ(places.size(), allowed->size());
  for (size_t i = 0; i < places.size(); ++i)
    EXPECT_EQ(places[i].cpu, (*allowed)[i]);
  auto missing = places_of({cpu_count_max - 1}); // no such CPU here: no topology to read
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].package, unknown_package);
  EXPECT_EQ(missing[0].core, cpu_count_max - 1);
}

} // namespace
} // namespace crescent::bench
