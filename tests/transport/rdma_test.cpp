// RDMA code: built wherever rdma-core exists; these machines have no RDMA device, so what runs
// here is the "unavailable, with the reason" path.
#include "messages/errors.hpp"
#include "transport/rdma/rdma_devices.hpp"

#include <gtest/gtest.h>

namespace crescent::transport {
namespace {

TEST(rdma, device_discovery_answers_either_way) {
  auto devices = rdma_devices();
  if (!devices) {
    EXPECT_TRUE(is(devices.error(), errc::unavailable)) << describe(devices.error());
    GTEST_SKIP() << describe(devices.error());
  }
  for (const auto& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.numa_node, -1);
  }
}

} // namespace
} // namespace crescent::transport
