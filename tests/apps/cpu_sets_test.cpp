// `crescent bench transfer --cpus`: CPU lists in taskset -c's syntax, and how the two processes
// split the CPUs.
#include "apps/bench/cpu_sets.hpp"

#include "messages/errors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

namespace crescent::bench {
namespace {

TEST(cpu_sets, lists_parse_as_taskset_writes_them_sorted_and_unique) {
  EXPECT_EQ(parse_cpu_list("3"), (cpu_list{3}));
  EXPECT_EQ(parse_cpu_list("0-3,8"), (cpu_list{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("8,2-3,3,0"), (cpu_list{0, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("1023"), (cpu_list{1023}));
}

TEST(cpu_sets, a_bad_list_is_refused_with_what_is_wrong) {
  for (std::string_view bad : {"", ",", "0,", ",0", "0,,1", "a", "0-", "-1", "3-1", "1024",
                               "0-1024", "1.5", " 1", "99999999999999999999"}) {
    auto cpus = parse_cpu_list(bad);
    ASSERT_FALSE(cpus) << "\"" << bad << "\"";
    EXPECT_TRUE(is(cpus.error(), errc::invalid_argument)) << bad;
    EXPECT_NE(describe(cpus.error()).find('"' + std::string{bad} + '"'), std::string::npos)
        << describe(cpus.error());
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

TEST(cpu_sets, auto_gives_each_process_half_the_client_the_larger) {
  auto two = choose_cpus("auto", {0, 1});
  ASSERT_TRUE(two);
  EXPECT_EQ(two->client, (cpu_list{0}));
  EXPECT_EQ(two->peer, (cpu_list{1}));
  auto odd = choose_cpus("auto", {2, 4, 6});
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->client, (cpu_list{2, 4}));
  EXPECT_EQ(odd->peer, (cpu_list{6}));
}

TEST(cpu_sets, auto_with_one_cpu_and_none_leave_both_to_the_kernel) {
  for (auto [spec, allowed] : {std::pair{"auto", cpu_list{3}}, std::pair{"none", cpu_list{0, 1}}}) {
    auto cpus = choose_cpus(spec, allowed);
    ASSERT_TRUE(cpus) << spec;
    EXPECT_TRUE(cpus->client.empty()) << spec;
    EXPECT_TRUE(cpus->peer.empty()) << spec;
  }
}

TEST(cpu_sets, explicit_lists_must_name_cpus_this_process_may_use) {
  auto ok = choose_cpus("0-1:2,3", {0, 1, 2, 3});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->client, (cpu_list{0, 1}));
  EXPECT_EQ(ok->peer, (cpu_list{2, 3}));
  for (std::string_view bad : {"0:4", "4:0", "0", "0:", ":1", "0:1:2", "x:1", "fast"}) {
    auto cpus = choose_cpus(bad, {0, 1, 2, 3});
    ASSERT_FALSE(cpus) << bad;
    EXPECT_TRUE(is(cpus.error(), errc::invalid_argument)) << describe(cpus.error());
  }
  EXPECT_NE(describe(choose_cpus("0:4", {0, 1, 2, 3}).error()).find("CPU 4 is not one"),
            std::string::npos);
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
    // A CPU past every one this machine has: the kernel refuses, and says so.
    if (allowed->back() + 1 < cpu_count_max && sysconf(_SC_NPROCESSORS_CONF) < cpu_count_max) {
      auto err = pin_this_thread({cpu_count_max - 1});
      EXPECT_TRUE(err);
      EXPECT_NE(describe(err).find("sched_setaffinity"), std::string::npos) << describe(err);
    }
  }).join();
}

} // namespace
} // namespace crescent::bench
