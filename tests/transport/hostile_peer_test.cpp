// Peers that answer with statuses no data-plane server sends: the initiator's own verdicts
// (timed out, cancelled), "none" with a refusal's shape, or values that are no error code at
// all. The operation fails with a reason that says so; it neither takes the peer's word for a
// timeout or a cancellation nor waits for its deadline.
#include "messages/errors.hpp"
#include "odd_status_server.hpp"
#include "tcp_test_peer.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;

TEST(hostile_peer, statuses_that_are_no_refusal_fail_the_operation_with_a_reason) {
  for (errc odd : {errc::timeout, errc::cancelled, static_cast<errc>(200)}) {
    const auto status = static_cast<uint8_t>(odd);
    odd_status_server server{status};
    auto engine = tcp_initiator(server.port());
    ASSERT_TRUE(engine);
    for (auto kind : {op_kind::read, op_kind::write}) {
      std::vector<std::byte> buffer(4096);
      const transfer_op op{kind, buffer, region_handle{1, 1, 0, 1u << 20, 7}, 0};
      const auto deadline = clock_type::now() + 10s;
      auto id = engine->submit({&op, 1}, deadline);
      ASSERT_TRUE(id) << describe(id.error());
      auto results = engine->wait(*id);
      ASSERT_TRUE(results) << describe(results.error());
      const auto& r = results->at(0);
      EXPECT_EQ(r.state, op_state::failed)
          << "status " << int{status} << ": " << describe(r.reason);
      EXPECT_TRUE(is(r.reason, errc::io_error)) << describe(r.reason);
      EXPECT_NE(describe(r.reason).find("answered with status " + std::to_string(status)),
                std::string::npos)
          << describe(r.reason);
      EXPECT_LT(clock_type::now(), deadline - 5s) << "it waited for the deadline";
    }
    // Each such answer ends the connection it came on: the peer is not trusted after it.
    EXPECT_GE(server.connections(), 2);
  }
}

} // namespace
} // namespace crescent::transport
