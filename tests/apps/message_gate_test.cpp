// The message gate of `crescent up`: what it reads in a BASP frame (CAF's own serializer writes
// the frames here), and what it does with frames on a real loopback connection when a fault
// takes every matching one (probability 1: nothing is left to chance).
#include "apps/up/message_gate.hpp"

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"
#include "support/deterministic.hpp"

#include <caf/binary_serializer.hpp>
#include <caf/message_id.hpp>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace crescent::testing {
namespace {

using namespace crescent::up;

void put_be(std::vector<std::byte>& out, uint64_t x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out.push_back(static_cast<std::byte>(x >> (8 * (n - 1 - i))));
}

// A BASP header (source actor 7, destination actor 9) and then `payload`.
std::vector<std::byte> frame_with(uint8_t op, uint64_t mid, const std::vector<char>& payload) {
  std::vector<std::byte> out;
  put_be(out, op, 1);
  put_be(out, 0, 3); // padding, flags
  put_be(out, payload.size(), 4);
  put_be(out, mid, 8);
  put_be(out, 7, 8); // source actor
  put_be(out, 9, 8); // destination actor
  for (char c : payload)
    out.push_back(static_cast<std::byte>(c));
  return out;
}

// A frame as BASP writes a message: the header, then the forwarding stack and the message.
std::vector<std::byte> frame_of(deterministic_system& ds, uint8_t op, uint64_t mid,
                                const caf::message& msg) {
  std::vector<char> payload;
  caf::binary_serializer sink{ds.sys, payload};
  std::vector<caf::strong_actor_ptr> stages;
  EXPECT_FALSE(sink(stages, msg));
  return frame_with(op, mid, payload);
}

caf::message tokens_message() {
  return caf::make_message(tokens_atom::value,
                           make_envelope<wire::TokenBatch>([](wire::TokenBatch::Builder out) {
                             out.setRequestId(3);
                             out.initTokens(2).set(0, 1);
                           }));
}

constexpr uint64_t async_mid = caf::message_id::default_async_value;

TEST(message_gate, reads_the_leading_atom_of_a_message_or_reply) {
  deterministic_system ds;
  auto tokens = read_frame(frame_of(ds, 0x02, async_mid, tokens_message()));
  ASSERT_TRUE(tokens);
  EXPECT_TRUE(tokens->message);
  EXPECT_FALSE(tokens->routed);
  EXPECT_EQ(tokens->type, "tokens");
  auto ready = read_frame(frame_of(ds, 0x03, async_mid, caf::make_message(kv_ready_atom::value)));
  ASSERT_TRUE(ready);
  EXPECT_TRUE(ready->routed);
  EXPECT_EQ(ready->type, "kv_ready");
  const uint64_t response = async_mid | caf::message_id::response_flag_mask;
  auto reply = read_frame(frame_of(ds, 0x02, response, caf::make_message(uint64_t{5})));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->type, "reply");
  // No atom first: a message, of no type a plan can name.
  auto bare = read_frame(frame_of(ds, 0x02, async_mid, caf::make_message(std::string{"@<>+"})));
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->message);
  EXPECT_EQ(bare->type, "");
}

TEST(message_gate, other_frames_are_no_messages_and_a_short_frame_is_not_read) {
  deterministic_system ds;
  auto beat = read_frame(frame_of(ds, 0x06, 0, caf::message{}));
  ASSERT_TRUE(beat);
  EXPECT_FALSE(beat->message);
  auto whole = frame_of(ds, 0x02, async_mid, tokens_message());
  EXPECT_FALSE(read_frame(std::span{whole}.first(whole.size() - 1)));
  EXPECT_FALSE(read_frame(std::span{whole}.first(frame_header_bytes - 1)));
}

// A loopback listener standing in for a node process.
struct node_stand_in {
  int listener = -1;
  uint16_t port = 0;
  node_stand_in() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener, 4), 0);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~node_stand_in() { ::close(listener); }
};

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// A heartbeat frame: never faulted, and frames that are not held keep their order, so once it
// arrived every frame sent before it has arrived or is gone.
std::vector<std::byte> sentinel(deterministic_system& ds) {
  return frame_of(ds, 0x06, 0, caf::message{});
}

void send(int fd, std::vector<std::byte> bytes, const std::vector<std::byte>& end) {
  bytes.insert(bytes.end(), end.begin(), end.end());
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

// What `fd` receives up to and with the sentinel (10 s at most: a failure, not a pace).
std::vector<std::byte> receive_to(int fd, const std::vector<std::byte>& end) {
  std::vector<std::byte> out;
  pollfd p{fd, POLLIN, 0};
  while (out.size() < end.size() ||
         !std::equal(end.begin(), end.end(), out.end() - static_cast<ptrdiff_t>(end.size()))) {
    if (::poll(&p, 1, 10'000) <= 0)
      break;
    std::byte buf[4096];
    const auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      break;
    out.insert(out.end(), buf, buf + n);
  }
  EXPECT_GE(out.size(), end.size()) << "the sentinel did not come";
  return out;
}

size_t count_frames(std::span<const std::byte> bytes, const std::string& type) {
  size_t n = 0;
  while (bytes.size() >= frame_header_bytes) {
    const size_t size =
        frame_header_bytes + frame_payload_bytes(std::span<const std::byte, 32>{bytes.data(), 32});
    auto v = read_frame(bytes.first(std::min(size, bytes.size())));
    if (!v)
      break;
    n += v->type == type ? 1 : 0;
    bytes = bytes.subspan(size);
  }
  return n;
}

fault message_fault(fault_kind kind, std::string type) {
  fault f;
  f.kind = kind;
  f.probability = 1.0;
  f.match.type = std::move(type);
  return f;
}

TEST(message_gate, duplicates_and_drops_whole_frames_of_the_type_named_and_passes_the_rest) {
  deterministic_system ds;
  node_stand_in node;
  auto gate = message_gate::start(
      2, "127.0.0.1", node.port,
      {message_fault(fault_kind::duplicate, "tokens"), message_fault(fault_kind::drop, "kv_ready")},
      1);
  ASSERT_TRUE(gate) << describe(gate.error());
  int main_side = connect_to((*gate)->port());
  int node_side = ::accept(node.listener, nullptr, nullptr);
  ASSERT_GE(node_side, 0);
  const auto tokens = frame_of(ds, 0x02, async_mid, tokens_message());
  const auto ready = frame_of(ds, 0x02, async_mid, caf::make_message(kv_ready_atom::value));
  const auto end = sentinel(ds);
  std::vector<std::byte> both = tokens;
  both.insert(both.end(), ready.begin(), ready.end());
  // Before the faults start, frames pass as they are.
  send(main_side, both, end);
  auto got = receive_to(node_side, end);
  EXPECT_EQ(count_frames(got, "tokens"), 1u);
  EXPECT_EQ(count_frames(got, "kv_ready"), 1u);
  (*gate)->activate(0);
  (*gate)->activate(1);
  send(main_side, both, end); // the main process's messages to the node
  got = receive_to(node_side, end);
  EXPECT_EQ(count_frames(got, "tokens"), 2u);
  EXPECT_EQ(count_frames(got, "kv_ready"), 0u);
  send(node_side, both, end); // and the node's to the main process
  got = receive_to(main_side, end);
  EXPECT_EQ(count_frames(got, "tokens"), 2u);
  EXPECT_EQ(count_frames(got, "kv_ready"), 0u);
  const auto c = (*gate)->counts();
  EXPECT_EQ(c.frames, 6u);
  EXPECT_EQ(c.duplicated, 2u);
  EXPECT_EQ(c.dropped, 2u);
  ::close(main_side);
  ::close(node_side);
}

// Node 2's process and node 1's, as CAF names them on the wire.
caf::node_id node_id_of(uint8_t n) {
  caf::node_id::default_data::host_id_type host{};
  host[0] = n;
  return caf::make_node_id(1000 + n, host);
}

// A frame that node `from` sends to node `to` through the main process: BASP's routed message
// names both processes before the forwarding stack and the message.
std::vector<std::byte> routed_frame(deterministic_system& ds, uint8_t from, uint8_t to,
                                    const caf::message& msg) {
  std::vector<char> payload;
  caf::binary_serializer sink{ds.sys, payload};
  auto source = node_id_of(from);
  auto dest = node_id_of(to);
  std::vector<caf::strong_actor_ptr> stages;
  EXPECT_FALSE(sink(source, dest, stages, msg));
  return frame_with(0x03, async_mid, payload);
}

std::shared_ptr<gate_directory> directory_of_nodes_1_and_2() {
  auto d = std::make_shared<gate_directory>();
  d->add_place(node_id_of(0), main_place);
  d->add_place(node_id_of(1), 1);
  d->add_place(node_id_of(2), 2);
  d->roles[{2, 7}] = "decode"; // frame_of's source actor, on node 2
  d->roles[{1, 9}] = "prefill";
  return d;
}

TEST(message_gate, a_routed_frame_is_decided_once_at_the_gate_of_the_node_that_sent_it) {
  deterministic_system ds;
  node_stand_in node;
  auto between = message_fault(fault_kind::drop, "kv_ready");
  between.match.node = 2;
  between.match.peer = 1;
  auto gate = message_gate::start(2, "127.0.0.1", node.port, {between}, 1);
  ASSERT_TRUE(gate) << describe(gate.error());
  (*gate)->set_directory(directory_of_nodes_1_and_2());
  int main_side = connect_to((*gate)->port());
  int node_side = ::accept(node.listener, nullptr, nullptr);
  ASSERT_GE(node_side, 0);
  const auto end = sentinel(ds);
  const auto ready = caf::make_message(kv_ready_atom::value);
  (*gate)->activate(0);
  // From node 1 to node 2, reaching node 2's gate from the main process: node 1's gate decided.
  send(main_side, routed_frame(ds, 1, 2, ready), end);
  EXPECT_EQ(count_frames(receive_to(node_side, end), "kv_ready"), 1u);
  // From node 2 to node 1: this gate's to decide, between the nodes the fault names.
  send(node_side, routed_frame(ds, 2, 1, ready), end);
  EXPECT_EQ(count_frames(receive_to(main_side, end), "kv_ready"), 0u);
  // From node 2 to the main process: not between nodes 1 and 2.
  send(node_side, frame_of(ds, 0x02, async_mid, ready), end);
  EXPECT_EQ(count_frames(receive_to(main_side, end), "kv_ready"), 1u);
  EXPECT_EQ((*gate)->counts().frames, 2u) << "the frame routed to node 2 is not counted here";
  ::close(main_side);
  ::close(node_side);
}

TEST(message_gate, roles_come_from_the_directory_and_take_nothing_before_it) {
  deterministic_system ds;
  node_stand_in node;
  auto from_decode = message_fault(fault_kind::drop, "tokens");
  from_decode.match.from = "decode";
  from_decode.match.to = "request"; // any actor of the main process not in the table
  auto gate = message_gate::start(2, "127.0.0.1", node.port, {from_decode}, 1);
  ASSERT_TRUE(gate) << describe(gate.error());
  int main_side = connect_to((*gate)->port());
  int node_side = ::accept(node.listener, nullptr, nullptr);
  ASSERT_GE(node_side, 0);
  const auto end = sentinel(ds);
  const auto tokens = frame_of(ds, 0x02, async_mid, tokens_message()); // actor 7 -> actor 9
  (*gate)->activate(0);
  send(node_side, tokens, end);
  EXPECT_EQ(count_frames(receive_to(main_side, end), "tokens"), 1u) << "no directory yet";
  (*gate)->set_directory(directory_of_nodes_1_and_2());
  send(node_side, tokens, end);
  EXPECT_EQ(count_frames(receive_to(main_side, end), "tokens"), 0u);
  send(main_side, tokens, end); // from the main process's actor 7: no decode worker
  EXPECT_EQ(count_frames(receive_to(node_side, end), "tokens"), 1u);
  ::close(main_side);
  ::close(node_side);
}

} // namespace
} // namespace crescent::testing
