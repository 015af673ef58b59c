// The window of ids an actor took (actors/common/recent_ids.hpp).
#include "actors/common/recent_ids.hpp"

#include <gtest/gtest.h>

namespace crescent {
namespace {

TEST(recent_ids, a_second_copy_is_known_until_capacity_newer_ids_push_it_out) {
  recent_ids ids{3};
  EXPECT_TRUE(ids.insert(7));
  EXPECT_FALSE(ids.insert(7)) << "a copy";
  EXPECT_TRUE(ids.insert(8));
  EXPECT_TRUE(ids.insert(9));
  EXPECT_TRUE(ids.contains(7));
  EXPECT_TRUE(ids.insert(10)); // 7, the oldest, leaves
  EXPECT_FALSE(ids.contains(7));
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_TRUE(ids.insert(7)) << "too late to be known";
  EXPECT_FALSE(ids.contains(8));
  EXPECT_TRUE(ids.contains(9) && ids.contains(10));
}

} // namespace
} // namespace crescent
