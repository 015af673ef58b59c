// How the TCP data-plane server groups its responses, played against a raw socket. It holds
// write acknowledgements while more requests are buffered, but sends them at once behind a
// write marked flag_ack_now, even when the next request's payload has not arrived. Reads
// buffered together are answered with one send, in order, refusals included, up to the first
// request that is not a read.
#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/host_memory.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;
using crescent::testing::random_bytes;

tcp::request_header request(uint8_t kind, const region_handle& h, uint64_t id, uint64_t offset,
                            uint64_t length, uint8_t flags = 0) {
  tcp::request_header req;
  req.kind = kind;
  req.flags = flags;
  req.request_id = id;
  req.region_id = h.region_id;
  req.access_key = h.access_key;
  req.handle_offset = h.offset;
  req.handle_length = h.length;
  req.offset = offset;
  req.length = length;
  return req;
}

// An engine serving one region of `bytes`, and a raw connection to its server.
struct served_region {
  explicit served_region(uint64_t bytes) {
    transfer_options o;
    o.local_nodes = {1};
    o.enable_rdma = false;
    // A server waiting for bytes that will not come drops this silent peer after this long:
    // the test's next read then fails instead of hanging.
    o.tcp_peer_silence_max = 2s;
    auto e = transfer_engine::create(o);
    auto m = host_memory::allocate(bytes);
    if (!e || !m) {
      ADD_FAILURE() << describe(e ? m.error() : e.error());
      return;
    }
    engine = *e;
    memory = std::move(*m);
    auto h = engine->register_region(1, memory.data(), memory.size_bytes());
    auto c = h ? tcp::connect_to("127.0.0.1", engine->self_info().tcp_port, 2s)
               : caf::expected<int>{h.error()};
    if (!c) {
      ADD_FAILURE() << describe(c.error());
      return;
    }
    region = *h;
    fd = *c;
    tcp::set_receive_timeout(fd, 10s);
  }
  ~served_region() {
    if (fd >= 0)
      close(fd);
    engine.reset(); // before the memory its region lies in
  }

  host_memory memory;
  std::shared_ptr<transfer_engine> engine;
  region_handle region;
  int fd = -1;
};

TEST(server_responses, a_write_marked_ack_now_is_acknowledged_before_the_next_payload_arrives) {
  constexpr uint64_t bytes = 4096;
  served_region s{2 * bytes};
  ASSERT_GE(s.fd, 0);

  auto first = random_bytes(bytes, 1);
  auto second = random_bytes(bytes, 2);
  auto a = request(tcp::kind_write, s.region, 1, 0, bytes, tcp::flag_ack_now);
  auto b = request(tcp::kind_write, s.region, 2, bytes, bytes);
  iovec iov[4] = {
      {&a, sizeof(a)}, {first.data(), first.size()}, {&b, sizeof(b)}, {second.data(), bytes / 2}};
  ASSERT_FALSE(tcp::write_all(s.fd, iov, 4));
  tcp::response_header ack;
  ASSERT_FALSE(tcp::read_full(s.fd, &ack, sizeof(ack)));
  EXPECT_EQ(ack.request_id, 1u);
  EXPECT_EQ(ack.status, 0);
  EXPECT_EQ(0, std::memcmp(s.memory.data(), first.data(), bytes));

  iovec rest{second.data() + bytes / 2, bytes / 2};
  ASSERT_FALSE(tcp::write_all(s.fd, &rest, 1));
  ASSERT_FALSE(tcp::read_full(s.fd, &ack, sizeof(ack)));
  EXPECT_EQ(ack.request_id, 2u);
  EXPECT_EQ(ack.status, 0);
  EXPECT_EQ(0, std::memcmp(s.memory.data() + bytes, second.data(), bytes));
}

// Reads, one of them refused, then a write and a read of what it wrote, sent at once.
TEST(server_responses, reads_buffered_together_are_answered_in_order_up_to_a_write) {
  served_region s{8192};
  ASSERT_GE(s.fd, 0);
  auto bytes = random_bytes(8192, 3);
  std::memcpy(s.memory.data(), bytes.data(), bytes.size());
  auto written = random_bytes(100, 4);
  auto refused = request(tcp::kind_read, s.region, 2, 0, 10);
  refused.access_key ^= 1;
  tcp::request_header reqs[5] = {request(tcp::kind_read, s.region, 1, 1, 1000), refused,
                                 request(tcp::kind_read, s.region, 3, 1001, 2000),
                                 request(tcp::kind_write, s.region, 4, 5000, written.size()),
                                 request(tcp::kind_read, s.region, 5, 5000, written.size())};
  iovec iov[6] = {{reqs, 4 * sizeof(tcp::request_header)},
                  {written.data(), written.size()},
                  {&reqs[4], sizeof(tcp::request_header)}};
  ASSERT_FALSE(tcp::write_all(s.fd, iov, 3));

  // Each expected response: its request, and the bytes of the region it carries (none for a
  // refusal or an acknowledgement).
  struct expected_response {
    uint64_t request_id;
    uint64_t offset;
    uint64_t length;
  };
  const expected_response want[] = {
      {1, 1, 1000}, {2, 0, 0}, {3, 1001, 2000}, {4, 0, 0}, {5, 5000, 100}};
  for (const auto& w : want) {
    tcp::response_header res;
    ASSERT_FALSE(tcp::read_full(s.fd, &res, sizeof(res)));
    ASSERT_EQ(res.request_id, w.request_id);
    if (w.request_id == 2) {
      ASSERT_NE(res.status, 0);
      std::string message(res.message_bytes, '\0');
      ASSERT_FALSE(tcp::read_full(s.fd, message.data(), message.size()));
      EXPECT_FALSE(message.empty());
      continue;
    }
    ASSERT_EQ(res.status, 0) << "request " << w.request_id;
    ASSERT_EQ(res.length, w.length);
    std::vector<std::byte> payload(res.length);
    ASSERT_FALSE(tcp::read_full(s.fd, payload.data(), payload.size()));
    if (w.request_id == 5)
      EXPECT_EQ(payload, written);
    else
      EXPECT_EQ(0, std::memcmp(payload.data(), bytes.data() + w.offset, w.length));
  }
}

} // namespace
} // namespace crescent::transport
