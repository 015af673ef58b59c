// The parts of the RDMA path that run without a device: the region table's address lookup,
// the describe, connect and release requests of the TCP data-plane server (through the
// initiator's control channel and through raw sockets), path order and the RDMA options.
#include "messages/errors.hpp"
#include "odd_status_server.hpp"
#include "transport/host_memory.hpp"
#include "transport/rdma/rdma_control.hpp"
#include "transport/rdma/rdma_devices.hpp"
#include "transport/region_table.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/transfer_engine.hpp"
#include "unaccepting_server.hpp"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;

// -- the region table's address lookup -------------------------------------------------------

struct address_lookup : ::testing::Test {
  std::unique_ptr<region_table> table = std::move(*region_table::create(64));
  std::vector<std::byte> memory = std::vector<std::byte>(1 << 16);
  std::byte* base = memory.data();
};

TEST_F(address_lookup, finds_the_region_holding_a_buffer_and_pins_it) {
  auto a = table->insert(1, base + 4096, 8192, 11);
  auto b = table->insert(1, base + 20000, 100, 12);
  ASSERT_TRUE(a && b);
  auto found = table->pin_address(base + 4096, 8192);
  ASSERT_TRUE(found) << describe(found.error());
  EXPECT_EQ(found->region_id, a->region_id);
  EXPECT_EQ(found->access_key, 11u);
  EXPECT_EQ(found->offset, 0u);
  EXPECT_EQ(found->length, 8192u);
  table->unpin(*found);
  auto inner = table->pin_address(base + 20050, 50);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->region_id, b->region_id);
  table->unpin(*inner);
}

TEST_F(address_lookup, a_buffer_reaching_past_every_region_is_not_found) {
  ASSERT_TRUE(table->insert(1, base + 4096, 8192, 11));
  EXPECT_TRUE(is(table->pin_address(base + 4096, 8193).error(), errc::not_found));
  EXPECT_TRUE(is(table->pin_address(base + 4095, 2).error(), errc::not_found));
  EXPECT_TRUE(is(table->pin_address(base + 4096 + 8192, 1).error(), errc::not_found));
  EXPECT_TRUE(is(table->pin_address(base, 10).error(), errc::not_found));
  EXPECT_TRUE(is(table->pin_address(nullptr, 10).error(), errc::invalid_argument));
  auto* top = reinterpret_cast<std::byte*>(UINTPTR_MAX - 4);
  EXPECT_TRUE(is(table->pin_address(top, 10).error(), errc::invalid_argument));
}

TEST_F(address_lookup, overlapping_regions_are_searched_below_the_address) {
  // A large region, then small ones registered inside and just below the buffer.
  auto large = table->insert(1, base, 60000, 1);
  ASSERT_TRUE(large);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(table->insert(1, base + 30000 + i * 100, 50, 100 + i));
  auto found = table->pin_address(base + 30960, 2000);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->region_id, large->region_id);
  table->unpin(*found);
}

TEST_F(address_lookup, an_unregistered_region_is_no_longer_found) {
  auto a = table->insert(1, base, 4096, 1);
  ASSERT_TRUE(a);
  ASSERT_FALSE(table->remove(*a));
  EXPECT_TRUE(is(table->pin_address(base, 10).error(), errc::not_found));
  auto again = table->insert(1, base, 4096, 2);
  auto found = table->pin_address(base, 10);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->region_id, again->region_id);
  table->unpin(*found);
}

TEST_F(address_lookup, removal_waits_for_pins_taken_by_address) {
  auto a = table->insert(1, base, 4096, 1);
  auto pinned = table->pin_address(base + 10, 10);
  ASSERT_TRUE(pinned);
  std::atomic<bool> removed{false};
  std::thread remover([&] {
    EXPECT_FALSE(table->remove(*a));
    removed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(removed.load()) << "remove() must wait for the pin";
  EXPECT_TRUE(is(table->pin_address(base, 10).error(), errc::not_found)) << "no new pins";
  table->unpin(*pinned);
  remover.join();
  EXPECT_TRUE(removed.load());
}

TEST_F(address_lookup, pin_region_tells_where_the_whole_region_lies) {
  auto a = table->insert(1, base + 64, 1000, 5);
  ASSERT_TRUE(a);
  auto part = a->slice(100, 200);
  auto where = table->pin_region(part, 10, 20);
  ASSERT_TRUE(where);
  EXPECT_EQ(where->first, base + 64);
  EXPECT_EQ(where->second, 1000u);
  table->unpin(part);
  auto forged = part;
  forged.access_key = 6;
  EXPECT_TRUE(is(table->pin_region(forged, 0, 1).error(), errc::access_denied));
}

// -- describe and connect through the TCP data-plane server ----------------------------------

// Larger than the 16 MiB payload limit: a describe's length is a range, not a payload.
constexpr uint64_t big_region = 40ull << 20;

struct control_requests : ::testing::Test {
  void SetUp() override {
    transfer_options o;
    o.local_nodes = {1};
    o.enable_shm = false;
    o.enable_rdma = false; // the server of an engine without RDMA: what runs everywhere
    auto made = transfer_engine::create(o);
    ASSERT_TRUE(made) << describe(made.error());
    owner = *made;
    memory = std::move(*host_memory::allocate(big_region));
    region = *owner->register_region(1, memory.data(), memory.size_bytes());
    channel.emplace("127.0.0.1", owner->self_info().tcp_port, 1, 2000ms);
  }

  // One request written as raw bytes on `fd`, and its answer: the header and what follows it
  // (the message of a refusal, or the payload).
  static std::pair<tcp::response_header, std::string> raw_exchange(int fd, tcp::request_header req,
                                                                   std::vector<std::byte> payload) {
    iovec iov[2] = {{&req, sizeof(req)}, {payload.data(), payload.size()}};
    EXPECT_FALSE(tcp::write_all(fd, iov, payload.empty() ? 1 : 2));
    tcp::response_header res;
    EXPECT_FALSE(tcp::read_full(fd, &res, sizeof(res)));
    std::vector<char> rest(res.status != 0 ? res.message_bytes : res.length);
    EXPECT_FALSE(tcp::read_full(fd, rest.data(), rest.size()));
    return {res, std::string(rest.begin(), rest.end())};
  }

  std::shared_ptr<transfer_engine> owner;
  host_memory memory;
  region_handle region;
  std::optional<rdma::control_channel> channel;
};

TEST_F(control_requests, describe_answers_where_the_region_lies) {
  auto whole = channel->describe(region);
  ASSERT_TRUE(whole) << describe(whole.error());
  EXPECT_EQ(whole->base_address, reinterpret_cast<uintptr_t>(memory.data()));
  EXPECT_EQ(whole->length, big_region);
  EXPECT_EQ(whole->region_id, region.region_id);
  EXPECT_EQ(whole->access_key, region.access_key);
  EXPECT_TRUE(whole->keys.empty()) << "an engine without RDMA has no remote keys";
  // A sub-handle describes the same region: the initiator adds the handle's offset itself.
  auto part = channel->describe(region.slice(1000, 5000));
  ASSERT_TRUE(part) << describe(part.error());
  EXPECT_EQ(part->base_address, whole->base_address);
  EXPECT_EQ(part->length, big_region);
}

TEST_F(control_requests, describe_refuses_as_a_read_would_and_keeps_the_connection) {
  ASSERT_TRUE(channel->describe(region));
  const auto generation = channel->generation();
  auto forged = region;
  forged.access_key ^= 0x10;
  auto err = channel->describe(forged);
  EXPECT_TRUE(is(err.error(), errc::access_denied)) << describe(err.error());
  auto grown = region.slice(0, 64);
  grown.offset = big_region - 32;
  err = channel->describe(grown);
  EXPECT_TRUE(is(err.error(), errc::out_of_range)) << describe(err.error());
  auto stale = owner->register_region(1, memory.data(), 4096);
  ASSERT_TRUE(stale);
  ASSERT_FALSE(owner->unregister_region(*stale));
  err = channel->describe(*stale);
  EXPECT_TRUE(is(err.error(), errc::not_found)) << describe(err.error());
  EXPECT_NE(describe(err.error()).find("node 1 refused"), std::string::npos);
  EXPECT_EQ(channel->generation(), generation) << "refusals are answers, not lost connections";
  EXPECT_TRUE(channel->describe(region));
}

rdma::connect_request good_connect() {
  rdma::connect_request req{};
  rdma::set_name(req.target_device, "mlx5_0");
  auto& e = req.initiator;
  rdma::set_name(e.device, "mlx5_0");
  e.gid[15] = 1;
  e.qp_num = 77;
  e.psn = 5;
  e.port = 1;
  e.link_layer = rdma::link_ethernet;
  e.mtu = 3;
  e.rd_atomic_init = 1;
  e.rd_atomic_dest = 1;
  return req;
}

TEST_F(control_requests, connect_to_an_engine_without_rdma_is_unavailable) {
  auto reply = channel->connect(good_connect(), region);
  ASSERT_FALSE(reply);
  EXPECT_TRUE(is(reply.error(), errc::unavailable)) << describe(reply.error());
  EXPECT_NE(describe(reply.error()).find("no RDMA device"), std::string::npos);
  EXPECT_TRUE(channel->describe(region)) << "the connection stays usable";
}

TEST_F(control_requests, malformed_connect_requests_are_refused) {
  auto req = good_connect();
  req.initiator.qp_num = 0;
  auto reply = channel->connect(req, region);
  ASSERT_FALSE(reply);
  EXPECT_TRUE(is(reply.error(), errc::invalid_argument)) << describe(reply.error());
  req = good_connect();
  std::memset(req.target_device, 'x', sizeof(req.target_device));
  reply = channel->connect(req, region);
  EXPECT_TRUE(is(reply.error(), errc::invalid_argument)) << describe(reply.error());
  EXPECT_TRUE(channel->describe(region));
}

// The owner creates queue pairs only for a peer that holds one of its handles: the handle is
// checked (as a describe of all of it) before anything else, and refused as a read would be.
TEST_F(control_requests, connect_must_come_with_a_valid_handle) {
  ASSERT_TRUE(channel->describe(region));
  const auto generation = channel->generation();
  auto forged = region;
  forged.access_key ^= 0x10;
  auto reply = channel->connect(good_connect(), forged);
  ASSERT_FALSE(reply);
  EXPECT_TRUE(is(reply.error(), errc::access_denied)) << describe(reply.error());
  auto grown = region.slice(0, 64);
  grown.offset = big_region - 32;
  reply = channel->connect(good_connect(), grown);
  EXPECT_TRUE(is(reply.error(), errc::out_of_range)) << describe(reply.error());
  auto stale = owner->register_region(1, memory.data(), 4096);
  ASSERT_TRUE(stale);
  ASSERT_FALSE(owner->unregister_region(*stale));
  reply = channel->connect(good_connect(), *stale);
  EXPECT_TRUE(is(reply.error(), errc::not_found)) << describe(reply.error());
  // Checked before the request itself: a malformed request with a bad handle is refused for
  // the handle, so nothing about the request is judged for a stranger.
  auto bad = good_connect();
  bad.initiator.qp_num = 0;
  reply = channel->connect(bad, forged);
  EXPECT_TRUE(is(reply.error(), errc::access_denied)) << describe(reply.error());
  EXPECT_EQ(channel->generation(), generation) << "refusals are answers";
  // A valid sub-handle vouches as well as the whole region: past the check, this engine
  // simply has no RDMA.
  reply = channel->connect(good_connect(), region.slice(100, 10));
  EXPECT_TRUE(is(reply.error(), errc::unavailable)) << describe(reply.error());
}

TEST_F(control_requests, release_is_answered_and_keeps_the_connection) {
  // Nothing to send before the connection exists: a queue pair connected through a lost one
  // was destroyed by the owner when it ended.
  EXPECT_FALSE(channel->release("mlx5_0", 77, channel->generation()));
  EXPECT_EQ(channel->fd(), -1) << "release alone never opens a connection";
  ASSERT_TRUE(channel->describe(region));
  const auto generation = channel->generation();
  auto err = channel->release("mlx5_0", 77, generation);
  EXPECT_TRUE(is(err, errc::unavailable)) << describe(err);
  EXPECT_NE(describe(err).find("no RDMA device"), std::string::npos);
  EXPECT_EQ(channel->generation(), generation);
  EXPECT_FALSE(channel->release("mlx5_0", 77, generation + 1)) << "an older connection's: done";
  EXPECT_TRUE(channel->describe(region)) << "the connection stays usable";
}

// The control connection notices a peer whose host vanished while idle: TCP keepalive.
TEST_F(control_requests, the_control_connection_uses_keepalive) {
  ASSERT_TRUE(channel->describe(region));
  ASSERT_GE(channel->fd(), 0);
  int on = 0;
  socklen_t len = sizeof(on);
  ASSERT_EQ(getsockopt(channel->fd(), SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
  EXPECT_EQ(on, 1);
  int idle = 0;
  len = sizeof(idle);
  ASSERT_EQ(getsockopt(channel->fd(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, &len), 0);
  EXPECT_EQ(idle, rdma::keepalive_idle_s);
  int count = 0;
  len = sizeof(count);
  ASSERT_EQ(getsockopt(channel->fd(), IPPROTO_TCP, TCP_KEEPCNT, &count, &len), 0);
  EXPECT_EQ(count, rdma::keepalive_probes);
}

// A connect whose payload has the wrong size is drained and refused; the stream stays in step.
TEST_F(control_requests, a_connect_of_the_wrong_size_is_drained_and_refused) {
  auto fd = tcp::connect_to("127.0.0.1", owner->self_info().tcp_port, 2000ms);
  ASSERT_TRUE(fd);
  tcp::set_receive_timeout(*fd, 2000ms);
  auto exchange = [&](tcp::request_header req, std::vector<std::byte> payload) {
    return raw_exchange(*fd, req, std::move(payload)).first;
  };
  tcp::request_header connect;
  connect.kind = tcp::kind_connect;
  connect.request_id = 1;
  connect.length = 100;
  auto res = exchange(connect, std::vector<std::byte>(100));
  EXPECT_EQ(res.request_id, 1u);
  EXPECT_EQ(res.status, static_cast<uint8_t>(errc::invalid_argument));
  tcp::request_header describe_req;
  describe_req.kind = tcp::kind_describe;
  describe_req.request_id = 2;
  describe_req.region_id = region.region_id;
  describe_req.access_key = region.access_key;
  describe_req.handle_length = region.length;
  describe_req.length = region.length;
  res = exchange(describe_req, {});
  EXPECT_EQ(res.request_id, 2u);
  EXPECT_EQ(res.status, 0);
  EXPECT_EQ(res.length, sizeof(rdma::describe_reply));
  close(*fd);
}

// Release requests of the wrong size are drained and refused, malformed ones refused; the
// stream stays in step either way.
TEST_F(control_requests, malformed_release_requests_are_refused_in_step) {
  auto fd = tcp::connect_to("127.0.0.1", owner->self_info().tcp_port, 2000ms);
  ASSERT_TRUE(fd);
  tcp::set_receive_timeout(*fd, 2000ms);
  auto exchange = [&](tcp::request_header req, std::vector<std::byte> payload) {
    return raw_exchange(*fd, req, std::move(payload));
  };
  tcp::request_header release;
  release.kind = tcp::kind_release;
  release.request_id = 1;
  release.length = 3;
  auto [res, message] = exchange(release, std::vector<std::byte>(3));
  EXPECT_EQ(res.request_id, 1u);
  EXPECT_EQ(res.status, static_cast<uint8_t>(errc::invalid_argument)) << message;
  rdma::release_request body{};
  rdma::set_name(body.device, "mlx5_0");
  body.qp_num = 0; // no queue pair has number 0
  std::vector<std::byte> bytes(sizeof(body));
  std::memcpy(bytes.data(), &body, sizeof(body));
  release.request_id = 2;
  release.length = bytes.size();
  std::tie(res, message) = exchange(release, bytes);
  EXPECT_EQ(res.request_id, 2u);
  EXPECT_EQ(res.status, static_cast<uint8_t>(errc::invalid_argument)) << message;
  body.qp_num = 5;
  std::memcpy(bytes.data(), &body, sizeof(body));
  release.request_id = 3;
  std::tie(res, message) = exchange(release, bytes);
  EXPECT_EQ(res.request_id, 3u);
  EXPECT_EQ(res.status, static_cast<uint8_t>(errc::unavailable)) << message;
  close(*fd);
}

TEST_F(control_requests, an_unreachable_owner_is_unavailable) {
  owner.reset();
  auto reply = channel->describe(region);
  ASSERT_FALSE(reply);
  EXPECT_TRUE(is(reply.error(), errc::unavailable)) << describe(reply.error());
  EXPECT_NE(describe(reply.error()).find("node 1"), std::string::npos);
}

TEST_F(control_requests, an_owner_that_goes_away_loses_the_connection) {
  ASSERT_TRUE(channel->describe(region));
  const auto generation = channel->generation();
  EXPECT_GE(channel->fd(), 0);
  owner.reset();
  auto reply = channel->describe(region);
  ASSERT_FALSE(reply);
  EXPECT_NE(channel->generation(), generation);
  EXPECT_EQ(channel->fd(), -1);
}

// -- paths and options -----------------------------------------------------------------------

std::shared_ptr<transfer_engine> engine_for(uint32_t node) {
  transfer_options o;
  o.local_nodes = {node};
  auto made = transfer_engine::create(o);
  EXPECT_TRUE(made) << describe(made.error());
  return made ? *made : nullptr;
}

TEST(rdma_paths, preference_is_local_shm_rdma_tcp) {
  auto a = engine_for(1);
  auto b = engine_for(2);
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(b->add_peer(a->self_info()));
  EXPECT_EQ(b->paths(2), (std::vector<std::string>{"local"}));
  EXPECT_TRUE(b->paths(77).empty());
  if (auto why = b->rdma_status()) {
    // RDMA reported unavailable: the engine says why, advertises no port, and skips the path.
    EXPECT_TRUE(is(why, errc::unavailable)) << describe(why);
    EXPECT_FALSE(describe(why).empty());
    EXPECT_TRUE(a->self_info().rdma_ports.empty());
    EXPECT_EQ(b->paths(1), (std::vector<std::string>{"shm", "tcp"}));
  } else {
    EXPECT_FALSE(a->self_info().rdma_ports.empty());
    EXPECT_EQ(b->paths(1), (std::vector<std::string>{"shm", "rdma", "tcp"}));
  }
}

TEST(rdma_paths, a_peer_advertising_rdma_is_reached_by_the_other_paths_without_it) {
  auto a = engine_for(1);
  auto b = engine_for(2);
  ASSERT_TRUE(a && b);
  if (!b->rdma_status())
    GTEST_SKIP() << "this machine has RDMA: rdma_backend_test.cpp covers it";
  auto info = a->self_info();
  rdma_port_info port;
  port.device = "mlx5_0";
  port.port = 1;
  port.link_layer = 2;
  port.gid[15] = 1;
  info.rdma_ports.push_back(port);
  ASSERT_FALSE(b->add_peer(info));
  EXPECT_EQ(b->paths(1), (std::vector<std::string>{"shm", "tcp"}));
  auto memory = std::move(*host_memory::allocate(4096));
  auto region = a->register_region(1, memory.data(), memory.size_bytes());
  ASSERT_TRUE(region);
  std::vector<std::byte> src(100, std::byte{4});
  EXPECT_FALSE(b->write(*region, 0, src));
  EXPECT_EQ(memory.data()[99], std::byte{4});
}

TEST(rdma_paths, rdma_is_off_where_options_or_tcp_say_so) {
  auto local = transfer_engine::create_local();
  ASSERT_TRUE(local);
  EXPECT_TRUE(is((*local)->rdma_status(), errc::unavailable));
  transfer_options o;
  o.local_nodes = {1};
  o.enable_tcp = false;
  auto no_tcp = transfer_engine::create(o);
  ASSERT_TRUE(no_tcp);
  auto why = (*no_tcp)->rdma_status();
  EXPECT_TRUE(is(why, errc::unavailable));
  EXPECT_NE(describe(why).find("TCP"), std::string::npos) << describe(why);
}

caf::error create_with(void (*change)(transfer_options&)) {
  transfer_options o;
  o.local_nodes = {1};
  change(o);
  auto made = transfer_engine::create(o);
  return made ? caf::error{} : std::move(made.error());
}

TEST(rdma_options, out_of_range_values_are_refused_on_every_machine) {
  auto refused = [](void (*change)(transfer_options&)) {
    auto err = create_with(change);
    EXPECT_TRUE(is(err, errc::invalid_argument)) << describe(err);
  };
  refused([](transfer_options& o) { o.rdma_qps_per_peer = 0; });
  refused([](transfer_options& o) { o.rdma_qps_per_peer = 65; });
  refused([](transfer_options& o) { o.rdma_queue_depth = 0; });
  refused([](transfer_options& o) { o.rdma_queue_depth = 4097; });
  refused([](transfer_options& o) { o.rdma_gid_index = -2; });
  refused([](transfer_options& o) { o.rdma_gid_index = 256; });
  refused([](transfer_options& o) { o.rdma_service_level = 16; });
  refused([](transfer_options& o) { o.rdma_qp_timeout = 0; }); // would wait forever
  refused([](transfer_options& o) { o.rdma_qp_timeout = 32; });
  refused([](transfer_options& o) { o.rdma_retry_count = 8; });
  refused([](transfer_options& o) { o.rdma_rnr_retry = 8; });
  refused([](transfer_options& o) { o.rdma_flush_timeout = std::chrono::milliseconds(9); });
  refused([](transfer_options& o) { o.rdma_expired_grace = std::chrono::seconds(61); });
  refused([](transfer_options& o) { o.rdma_preferred_devices = {""}; });
  refused([](transfer_options& o) { o.rdma_preferred_devices = {std::string(64, 'm')}; });
  refused([](transfer_options& o) {
    o.rdma_preferred_devices = {"mlx5_0"};
    o.rdma_fallback_devices = {"mlx5_0"};
  });
  refused([](transfer_options& o) {
    for (int i = 0; i < 17; ++i)
      o.rdma_fallback_devices.push_back("mlx5_" + std::to_string(i));
  });
  // Checked even where RDMA is off.
  refused([](transfer_options& o) {
    o.enable_rdma = false;
    o.rdma_queue_depth = 0;
  });
}

TEST(rdma_options, the_widest_valid_values_are_accepted) {
  auto accepted = [](void (*change)(transfer_options&)) {
    auto err = create_with(change);
    EXPECT_FALSE(err) << describe(err);
  };
  accepted([](transfer_options& o) { o.rdma_qp_timeout = 1; });
  accepted([](transfer_options& o) { o.rdma_qp_timeout = 31; });
  accepted([](transfer_options& o) {
    o.rdma_retry_count = 0;
    o.rdma_rnr_retry = 0;
  });
  accepted([](transfer_options& o) { o.rdma_service_level = 15; }); // clamped to 7 on RoCE
  accepted([](transfer_options& o) {
    o.rdma_flush_timeout = std::chrono::milliseconds(10);
    o.rdma_expired_grace = std::chrono::seconds(60);
  });
}

// Fork safety is asked for, not imposed; where no device exists asking changes nothing.
TEST(rdma_options, fork_safety_is_opt_in) {
  EXPECT_FALSE(transfer_options{}.rdma_fork_safe);
  if (rdma_devices())
    GTEST_SKIP() << "this machine has RDMA devices: ibv_fork_init would change this process";
  transfer_options o;
  o.local_nodes = {1};
  o.rdma_fork_safe = true;
  auto made = transfer_engine::create(o);
  ASSERT_TRUE(made) << describe(made.error());
  EXPECT_TRUE(is((*made)->rdma_status(), errc::unavailable));
}

TEST(rdma_options, named_devices_must_exist_where_rdma_does) {
  auto err = create_with([](transfer_options& o) {
    o.rdma_preferred_devices = {"no_such_device_0"};
    o.rdma_qps_per_peer = 64;
    o.rdma_queue_depth = 4096;
    o.rdma_gid_index = 3;
  });
  if (rdma_devices())
    EXPECT_TRUE(is(err, errc::invalid_argument)) << describe(err);
  else
    EXPECT_FALSE(err) << "without RDMA devices the names cannot be checked: " << describe(err);
}

// The peer's stop interrupts its control channel: a connect to a dark host ends within a step
// of its poll, not at its timeout, and the channel takes no request after that.
TEST(control_channel, an_interrupt_ends_a_hung_connect_and_every_later_request) {
  unaccepting_server server;
  ASSERT_TRUE(server.connects_hang()) << "this kernel accepts past a full queue: nothing to test";
  rdma::control_channel channel{"127.0.0.1", server.port(), 1, 60s};
  const region_handle h{1, 1, 0, 4096, 7};
  std::promise<caf::error> described;
  std::thread asker([&] {
    auto r = channel.describe(h);
    described.set_value(r ? caf::error{} : r.error());
  });
  auto answer = described.get_future();
  // The connect hangs (the server takes no handshake) until interrupted.
  EXPECT_EQ(answer.wait_for(200ms), std::future_status::timeout);
  channel.interrupt();
  EXPECT_EQ(answer.wait_for(5s), std::future_status::ready) << "the connect was not abandoned";
  asker.join();
  auto err = answer.get();
  EXPECT_TRUE(is(err, errc::unavailable)) << describe(err);
  auto later = channel.describe(h);
  ASSERT_FALSE(later);
  EXPECT_TRUE(is(later.error(), errc::unavailable)) << describe(later.error());
  EXPECT_NE(describe(later.error()).find("interrupted"), std::string::npos)
      << describe(later.error());
}

// A reply whose status is no refusal (here the initiator's own "timeout") is a peer that does
// not speak the protocol: the connection is dropped, not the status believed.
TEST(control_channel, a_reply_status_that_is_no_refusal_loses_the_connection) {
  odd_status_server server{static_cast<uint8_t>(errc::timeout)};
  rdma::control_channel channel{"127.0.0.1", server.port(), 1, 2s};
  auto r = channel.describe(region_handle{1, 1, 0, 4096, 7});
  ASSERT_FALSE(r);
  EXPECT_TRUE(is(r.error(), errc::io_error)) << describe(r.error());
  EXPECT_NE(describe(r.error()).find("not a refusal"), std::string::npos) << describe(r.error());
  EXPECT_EQ(channel.fd(), -1);
}

} // namespace
} // namespace crescent::transport
