// When the TCP data-plane server acknowledges writes. It holds acknowledgements while more
// requests are buffered, but sends them at once behind a write marked flag_ack_now, even when
// the next request's payload has not arrived: played here by a raw socket that sends a marked
// write, then the next write's header and only half of its payload.
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

tcp::request_header write_request(const region_handle& h, uint64_t id, uint64_t offset,
                                  uint64_t length, uint8_t flags) {
  tcp::request_header req;
  req.kind = tcp::kind_write;
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

TEST(server_acks, a_write_marked_ack_now_is_acknowledged_before_the_next_payload_arrives) {
  constexpr uint64_t bytes = 4096;
  transfer_options o;
  o.local_nodes = {1};
  o.enable_rdma = false;
  // A server that held the first acknowledgement would wait for the rest of the second
  // payload, and drop this silent peer after this long: the read below then fails.
  o.tcp_peer_silence_max = 2s;
  auto e = transfer_engine::create(o);
  ASSERT_TRUE(e) << describe(e.error());
  auto memory = host_memory::allocate(2 * bytes);
  ASSERT_TRUE(memory) << describe(memory.error());
  auto h = (*e)->register_region(1, memory->data(), memory->size_bytes());
  ASSERT_TRUE(h) << describe(h.error());
  auto fd = tcp::connect_to("127.0.0.1", (*e)->self_info().tcp_port, 2s);
  ASSERT_TRUE(fd) << describe(fd.error());
  tcp::set_receive_timeout(*fd, 10s);

  auto first = random_bytes(bytes, 1);
  auto second = random_bytes(bytes, 2);
  auto a = write_request(*h, 1, 0, bytes, tcp::flag_ack_now);
  auto b = write_request(*h, 2, bytes, bytes, 0);
  iovec iov[4] = {
      {&a, sizeof(a)}, {first.data(), first.size()}, {&b, sizeof(b)}, {second.data(), bytes / 2}};
  ASSERT_FALSE(tcp::write_all(*fd, iov, 4));
  tcp::response_header ack;
  ASSERT_FALSE(tcp::read_full(*fd, &ack, sizeof(ack)));
  EXPECT_EQ(ack.request_id, 1u);
  EXPECT_EQ(ack.status, 0);
  EXPECT_EQ(0, std::memcmp(memory->data(), first.data(), bytes));

  iovec rest{second.data() + bytes / 2, bytes / 2};
  ASSERT_FALSE(tcp::write_all(*fd, &rest, 1));
  ASSERT_FALSE(tcp::read_full(*fd, &ack, sizeof(ack)));
  EXPECT_EQ(ack.request_id, 2u);
  EXPECT_EQ(ack.status, 0);
  EXPECT_EQ(0, std::memcmp(memory->data() + bytes, second.data(), bytes));
  close(*fd);
  e->reset(); // before the memory its region lies in
}

} // namespace
} // namespace crescent::transport
