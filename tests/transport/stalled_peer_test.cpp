// Peers that stop in the middle of a message, played by a raw socket speaking the TCP data
// plane's protocol, or that never accept a connection: the batch ends at its deadline with
// timed_out, never later, whatever the stream was doing when the peer stalled.
#include "messages/errors.hpp"
#include "tcp_test_peer.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/transfer_engine.hpp"
#include "unaccepting_server.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;

// What the fake peer does with the first request it receives.
enum class stall {
  mid_read_payload, // answers a read with its response header and part of the payload
  before_ack,       // takes a write's payload and never acknowledges it
  silent,           // reads every request and answers none
};

// A data-plane server that answers one request as `how` says and then holds the connection
// open, silent, until it is destroyed.
class stalling_peer {
 public:
  explicit stalling_peer(stall how) {
    auto l = tcp::listen_on("127.0.0.1", 0);
    EXPECT_TRUE(l) << describe(l.error());
    listen_fd_ = l->first;
    port_ = l->second;
    thread_ = std::thread([this, how] { serve(how); });
  }

  ~stalling_peer() {
    shutdown(listen_fd_, SHUT_RDWR);
    if (fd_ >= 0)
      shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(listen_fd_);
    if (fd_ >= 0)
      close(fd_);
  }

  uint16_t port() const { return port_; }

 private:
  void serve(stall how) {
    int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0)
      return;
    fd_ = fd;
    if (how == stall::silent)
      return drain(fd);
    tcp::request_header req;
    if (tcp::read_full(fd, &req, sizeof(req)))
      return;
    if (how == stall::before_ack) {
      std::vector<std::byte> payload(req.length);
      if (tcp::read_full(fd, payload.data(), payload.size()))
        return;
    } else {
      tcp::response_header res;
      res.request_id = req.request_id;
      res.length = req.length;
      std::vector<std::byte> part(req.length / 2);
      iovec iov[2] = {{&res, sizeof(res)}, {part.data(), part.size()}};
      if (tcp::write_all(fd, iov, 2))
        return;
    }
    drain(fd);
  }

  // Silent until the initiator or the test ends the connection.
  static void drain(int fd) {
    char bytes[4096];
    while (recv(fd, bytes, sizeof(bytes), 0) > 0) {
    }
  }

  int listen_fd_ = -1;
  std::atomic<int> fd_{-1};
  uint16_t port_ = 0;
  std::thread thread_;
};

// Ends `op` on an engine that reaches node 1 only through `peer`, with a deadline 300 ms away.
op_result run_against(stalling_peer& peer, transfer_op op) {
  auto engine = tcp_initiator(peer.port());
  if (!engine)
    return {};
  const auto deadline = clock_type::now() + 300ms;
  auto id = engine->submit({&op, 1}, deadline);
  EXPECT_TRUE(id) << describe(id.error());
  auto results = engine->wait(*id);
  EXPECT_TRUE(results) << describe(results.error());
  // Ended by the deadline, not long after it (a hang here is the failure this file is about).
  EXPECT_LT(clock_type::now(), deadline + 5s);
  return results->at(0);
}

const region_handle remote{1, 1, 0, 1u << 20, 7};

TEST(stalled_peer, a_read_whose_payload_stops_halfway_times_out_at_its_deadline) {
  stalling_peer peer{stall::mid_read_payload};
  std::vector<std::byte> buffer(256u << 10);
  auto r = run_against(peer, {op_kind::read, buffer, remote, 0});
  EXPECT_EQ(r.state, op_state::timed_out) << describe(r.reason);
}

TEST(stalled_peer, a_write_never_acknowledged_times_out_at_its_deadline) {
  stalling_peer peer{stall::before_ack};
  std::vector<std::byte> buffer(64u << 10, std::byte{1});
  auto r = run_against(peer, {op_kind::write, buffer, remote, 0});
  EXPECT_EQ(r.state, op_state::timed_out) << describe(r.reason);
}

// A batch's callback may run on the watchdog's thread, from inside the TCP path's expire (its
// slices were still queued on a connection at the deadline), and may submit to the same peer
// from there. The path once held the peer's lock across that call: the submit deadlocked.
TEST(stalled_peer, a_callback_run_at_the_deadline_may_submit_to_the_same_peer) {
  stalling_peer peer{stall::silent};
  std::promise<op_state> second_done; // outlives the engine, whose end may still end `second`
  auto engine = tcp_initiator(peer.port());
  ASSERT_TRUE(engine);
  // Batch `blocker` fills the connection's window with reads the peer never answers...
  std::vector<std::byte> small(4096);
  std::vector<transfer_op> blocker(tcp::connection::window_slices,
                                   transfer_op{op_kind::read, small, remote, 0});
  auto blocker_id = engine->submit(blocker, clock_type::now() + 1s);
  ASSERT_TRUE(blocker_id) << describe(blocker_id.error());
  // ...so that `first` waits on the connection's queue until its deadline, ends on the
  // watchdog's thread, and its callback submits `second` to the same peer.
  const transfer_op op{op_kind::write, small, remote, 0};
  auto err = engine->submit({&op, 1}, clock_type::now() + 200ms, [&](std::vector<op_result> r) {
    EXPECT_EQ(r.at(0).state, op_state::timed_out) << describe(r.at(0).reason);
    auto again =
        engine->submit({&op, 1}, clock_type::now() + 200ms,
                       [&](std::vector<op_result> r2) { second_done.set_value(r2.at(0).state); });
    EXPECT_FALSE(again) << describe(again);
  });
  ASSERT_FALSE(err) << describe(err);
  auto second = second_done.get_future();
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready) << "the watchdog is stuck";
  EXPECT_EQ(second.get(), op_state::timed_out);
  auto results = engine->wait(*blocker_id);
  ASSERT_TRUE(results) << describe(results.error());
  for (auto& r : *results)
    EXPECT_EQ(r.state, op_state::timed_out) << describe(r.reason);
}

// A connect that hangs holds its connection's queued slices: they end at their batch's
// deadline, and the engine's end does not wait out the connect timeout.
TEST(stalled_peer, a_connect_that_hangs_ends_at_the_deadline_and_is_abandoned_at_the_end) {
  unaccepting_server server;
  ASSERT_TRUE(server.connects_hang()) << "this kernel accepts past a full queue: nothing to test";
  auto engine = tcp_initiator(server.port(), 60s);
  ASSERT_TRUE(engine);
  std::vector<std::byte> buffer(4096);
  const transfer_op op{op_kind::write, buffer, remote, 0};
  const auto deadline = clock_type::now() + 300ms;
  auto id = engine->submit({&op, 1}, deadline);
  ASSERT_TRUE(id) << describe(id.error());
  auto results = engine->wait(*id);
  ASSERT_TRUE(results) << describe(results.error());
  EXPECT_EQ(results->at(0).state, op_state::timed_out) << describe(results->at(0).reason);
  EXPECT_LT(clock_type::now(), deadline + 5s);
  // The connection is still connecting: stopping it gives the connect up within a step.
  const auto start = clock_type::now();
  engine.reset();
  EXPECT_LT(clock_type::now() - start, 5s);
}

// The other side: an initiator that asks for a read and then takes none of the response. The
// owner's server holds the region pinned while it sends; it must give up after a few of its
// silence limits (tcp_peer_silence_max), so that unregistering the region does not wait for
// ever.
TEST(stalled_peer, an_initiator_that_stops_reading_is_dropped_and_the_region_unpinned) {
  transfer_options o;
  o.local_nodes = {1};
  o.enable_rdma = false;
  o.tcp_peer_silence_max = 200ms;
  auto owner = *transfer_engine::create(o);
  std::vector<std::byte> memory(16u << 20);
  auto region = owner->register_region(1, memory.data(), memory.size());
  ASSERT_TRUE(region) << describe(region.error());
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  int small = 4096; // before connecting: a small window, so that the server blocks at once
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(owner->self_info().tcp_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  tcp::request_header req;
  req.kind = tcp::kind_read;
  req.request_id = 1;
  req.region_id = region->region_id;
  req.access_key = region->access_key;
  req.handle_offset = region->offset;
  req.handle_length = region->length;
  req.length = region->length;
  iovec iov{&req, sizeof(req)};
  ASSERT_FALSE(tcp::write_all(fd, &iov, 1));
  // The response's header shows that the server has pinned the region and is sending; of its
  // 16 MiB this client takes nothing more. Unregistering waits for the pin: it is bounded by
  // the server's limit, not by this client.
  tcp::response_header res;
  ASSERT_FALSE(tcp::read_full(fd, &res, sizeof(res)));
  ASSERT_EQ(res.status, 0);
  const auto start = clock_type::now();
  EXPECT_FALSE(owner->unregister_region(*region));
  // Each send may wait the limit once: a few limits, then the connection is dropped.
  EXPECT_LT(clock_type::now() - start, 5s);
  close(fd);
}

} // namespace
} // namespace crescent::transport
