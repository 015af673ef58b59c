// What the RDMA path decides without a device, tested everywhere: the describe, connect and
// release payloads and their checks, device order by NUMA node and by name, GID choice, which
// ports can reach each other, and RDMA ports in TransportPeer.
#include "messages/errors.hpp"
#include "transport/peer_wire.hpp"
#include "transport/rdma/rdma_topology.hpp"
#include "transport/rdma/rdma_wire.hpp"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace crescent::transport::rdma {
namespace {

qp_endpoint good_endpoint(uint8_t link = link_ethernet) {
  qp_endpoint e{};
  set_name(e.device, "mlx5_0");
  e.gid[10] = 0xff;
  e.gid[11] = 0xff;
  e.gid[12] = 10;
  e.gid[15] = 7;
  e.qp_num = 0x1234;
  e.psn = 0xabcdef;
  e.lid = link == link_infiniband ? 3 : 0;
  e.port = 1;
  e.link_layer = link;
  e.mtu = 5;
  e.rd_atomic_init = 16;
  e.rd_atomic_dest = 16;
  return e;
}

std::vector<std::byte> bytes_of(const connect_request& req) {
  std::vector<std::byte> out(sizeof(req));
  std::memcpy(out.data(), &req, sizeof(req));
  return out;
}

TEST(rdma_wire, a_good_endpoint_passes_both_link_layers) {
  EXPECT_FALSE(check_endpoint(good_endpoint(link_ethernet)));
  EXPECT_FALSE(check_endpoint(good_endpoint(link_infiniband)));
}

TEST(rdma_wire, endpoints_no_queue_pair_could_reach_are_refused) {
  auto refused = [](auto change) {
    auto e = good_endpoint();
    change(e);
    auto err = check_endpoint(e);
    EXPECT_TRUE(is(err, errc::invalid_argument)) << describe(err);
  };
  refused([](qp_endpoint& e) { std::memset(e.device, 0, sizeof(e.device)); });
  refused([](qp_endpoint& e) { std::memset(e.device, 'x', sizeof(e.device)); }); // no NUL
  refused([](qp_endpoint& e) { e.qp_num = 0; });
  refused([](qp_endpoint& e) { e.qp_num = 1u << 24; });
  refused([](qp_endpoint& e) { e.psn = 1u << 24; });
  refused([](qp_endpoint& e) { e.link_layer = 0; });
  refused([](qp_endpoint& e) { e.link_layer = 3; });
  refused([](qp_endpoint& e) { e.mtu = 0; });
  refused([](qp_endpoint& e) { e.mtu = 6; });
  refused([](qp_endpoint& e) { e.port = 0; });
  refused([](qp_endpoint& e) { std::memset(e.gid, 0, sizeof(e.gid)); }); // RoCE needs a GID
  refused([](qp_endpoint& e) {
    e.link_layer = link_infiniband;
    e.lid = 0;
  });
  refused([](qp_endpoint& e) { e.rd_atomic_init = 0; });
  refused([](qp_endpoint& e) { e.rd_atomic_dest = 0; });
}

TEST(rdma_wire, connect_requests_parse_only_when_whole_and_well_formed) {
  connect_request req{};
  set_name(req.target_device, "mlx5_1");
  req.initiator = good_endpoint();
  auto bytes = bytes_of(req);
  auto parsed = parse_connect_request(bytes);
  ASSERT_TRUE(parsed) << describe(parsed.error());
  EXPECT_EQ(name_of(parsed->target_device), "mlx5_1");
  EXPECT_EQ(parsed->initiator.qp_num, 0x1234u);

  EXPECT_TRUE(is(parse_connect_request(std::span{bytes}.first(bytes.size() - 1)).error(),
                 errc::invalid_argument));
  bytes.push_back(std::byte{0});
  EXPECT_TRUE(is(parse_connect_request(bytes).error(), errc::invalid_argument));

  auto nameless = req;
  std::memset(nameless.target_device, 0, sizeof(nameless.target_device));
  EXPECT_TRUE(is(parse_connect_request(bytes_of(nameless)).error(), errc::invalid_argument));
  auto bad = req;
  bad.initiator.qp_num = 0;
  EXPECT_TRUE(is(parse_connect_request(bytes_of(bad)).error(), errc::invalid_argument));
}

TEST(rdma_wire, release_requests_parse_only_when_whole_and_well_formed) {
  release_request req{};
  set_name(req.device, "mlx5_1");
  req.qp_num = 0x1234;
  std::vector<std::byte> bytes(sizeof(req));
  std::memcpy(bytes.data(), &req, sizeof(req));
  auto parsed = parse_release_request(bytes);
  ASSERT_TRUE(parsed) << describe(parsed.error());
  EXPECT_EQ(name_of(parsed->device), "mlx5_1");
  EXPECT_EQ(parsed->qp_num, 0x1234u);

  EXPECT_TRUE(is(parse_release_request(std::span{bytes}.first(bytes.size() - 1)).error(),
                 errc::invalid_argument));
  auto longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_TRUE(is(parse_release_request(longer).error(), errc::invalid_argument));

  auto refused = [&](auto change) {
    auto bad = req;
    change(bad);
    std::vector<std::byte> b(sizeof(bad));
    std::memcpy(b.data(), &bad, sizeof(bad));
    auto r = parse_release_request(b);
    ASSERT_FALSE(r);
    EXPECT_TRUE(is(r.error(), errc::invalid_argument)) << describe(r.error());
  };
  refused([](release_request& r) { r.qp_num = 0; });
  refused([](release_request& r) { r.qp_num = 1u << 24; });
  refused([](release_request& r) { std::memset(r.device, 0, sizeof(r.device)); });
  refused([](release_request& r) { std::memset(r.device, 'x', sizeof(r.device)); }); // no NUL
}

TEST(rdma_wire, describe_replies_round_trip) {
  std::vector<region_key> keys(2);
  set_name(keys[0].device, "mlx5_1");
  keys[0].rkey = 0x77;
  set_name(keys[1].device, "mlx5_0");
  keys[1].rkey = 0x88;
  auto bytes = encode_describe_reply(0x7f0000001000, 1u << 20, keys);
  EXPECT_EQ(bytes.size(), sizeof(describe_reply) + 2 * sizeof(region_key));
  auto r = parse_describe_reply(bytes);
  ASSERT_TRUE(r) << describe(r.error());
  EXPECT_EQ(r->base_address, 0x7f0000001000u);
  EXPECT_EQ(r->length, 1u << 20);
  ASSERT_EQ(r->keys.size(), 2u);
  EXPECT_EQ(name_of(r->keys[0].device), "mlx5_1"); // the owner's order is kept
  EXPECT_EQ(r->keys[1].rkey, 0x88u);
  auto none = parse_describe_reply(encode_describe_reply(4096, 10, {}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->keys.empty());
}

TEST(rdma_wire, malformed_describe_replies_are_refused) {
  std::vector<region_key> keys(1);
  set_name(keys[0].device, "mlx5_0");
  auto good = encode_describe_reply(4096, 100, keys);
  auto refused = [](std::vector<std::byte> b) {
    auto r = parse_describe_reply(b);
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_TRUE(is(r.error(), errc::io_error)) << describe(r.error());
    }
  };
  refused({good.begin(), good.begin() + 10});          // shorter than its header
  refused({good.begin(), good.end() - 1});             // shorter than its keys
  refused(encode_describe_reply(4096, 0, keys));       // empty region
  refused(encode_describe_reply(0, 100, keys));        // no address
  refused(encode_describe_reply(UINT64_MAX, 2, keys)); // wraps around
  auto many = good;
  describe_reply head;
  std::memcpy(&head, many.data(), sizeof(head));
  head.key_count = rdma_devices_max + 1;
  std::memcpy(many.data(), &head, sizeof(head));
  refused(many);
  std::vector<region_key> nameless(1);
  refused(encode_describe_reply(4096, 100, nameless));
}

// -- topology ----------------------------------------------------------------------------------

const std::vector<device_view> two_sockets = {
    {"mlx5_0", 0}, {"mlx5_1", 1}, {"mlx5_2", 0}, {"mlx5_3", -1}};

TEST(rdma_topology, devices_on_the_buffers_numa_node_come_first) {
  EXPECT_EQ(order_devices(two_sockets, 0, {}, {}), (std::vector<size_t>{0, 2, 1, 3}));
  EXPECT_EQ(order_devices(two_sockets, 1, {}, {}), (std::vector<size_t>{1, 0, 2, 3}));
  // Unknown: discovery order.
  EXPECT_EQ(order_devices(two_sockets, -1, {}, {}), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(order_devices(two_sockets, 5, {}, {}), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(rdma_topology, named_devices_override_numa_and_exclude_the_rest) {
  EXPECT_EQ(order_devices(two_sockets, 0, {"mlx5_1"}, {"mlx5_3"}), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(order_devices(two_sockets, 1, {}, {"mlx5_2", "mlx5_0"}), (std::vector<size_t>{2, 0}));
  EXPECT_EQ(order_devices(two_sockets, 0, {"mlx5_9", "mlx5_2"}, {}), (std::vector<size_t>{2}));
}

TEST(rdma_topology, roce_v2_ipv4_gids_are_preferred) {
  uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 5};
  uint8_t link_local[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t global[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t zero[16] = {};
  EXPECT_GT(gid_rank(v4, gid_type::roce_v2), gid_rank(global, gid_type::roce_v2));
  EXPECT_GT(gid_rank(global, gid_type::roce_v2), gid_rank(link_local, gid_type::roce_v2));
  EXPECT_GT(gid_rank(link_local, gid_type::roce_v2), gid_rank(v4, gid_type::roce_v1));
  EXPECT_GT(gid_rank(v4, gid_type::roce_v1), 0);
  EXPECT_EQ(gid_rank(zero, gid_type::roce_v2), 0);
  EXPECT_EQ(gid_rank(v4, gid_type::infiniband), 0);
  EXPECT_EQ(parse_gid_type("RoCE v2"), gid_type::roce_v2);
  EXPECT_EQ(parse_gid_type("IB/RoCE v1"), gid_type::roce_v1);
  EXPECT_EQ(parse_gid_type(""), gid_type::roce_v1);
}

TEST(rdma_topology, ports_reach_each_other_on_one_link_layer_and_subnet) {
  std::array<uint8_t, 16> a{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1};
  std::array<uint8_t, 16> same_subnet{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2};
  std::array<uint8_t, 16> other_subnet{0xfe, 0x80, 0, 0, 0, 0, 0, 9, 2};
  EXPECT_TRUE(ports_reachable(link_infiniband, a, link_infiniband, same_subnet));
  EXPECT_FALSE(ports_reachable(link_infiniband, a, link_infiniband, other_subnet));
  EXPECT_TRUE(ports_reachable(link_ethernet, a, link_ethernet, other_subnet)); // routed
  EXPECT_FALSE(ports_reachable(link_ethernet, a, link_infiniband, same_subnet));
}

TEST(rdma_topology, numa_node_of_memory_is_known_or_minus_one) {
  std::vector<char> buffer(1 << 16, 1);
  const int node = numa_node_of(buffer.data());
  EXPECT_GE(node, -1);
  EXPECT_LT(node, 4096);
}

// -- TransportPeer ---------------------------------------------------------------------------

peer_info peer_with_ports(size_t count) {
  peer_info p;
  p.nodes = {4};
  p.host_id = "host";
  p.pid = 10;
  for (size_t i = 0; i < count; ++i) {
    rdma_port_info r;
    r.device = "mlx5_" + std::to_string(i);
    r.port = 1;
    r.link_layer = 2;
    r.gid[15] = static_cast<uint8_t>(i + 1);
    p.rdma_ports.push_back(r);
  }
  return p;
}

caf::expected<peer_info> round_trip(const peer_info& p) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<wire::TransportPeer>();
  to_wire(p, root);
  return from_wire(root.asReader());
}

TEST(rdma_peer_wire, rdma_ports_survive_the_wire) {
  auto p = peer_with_ports(2);
  p.rdma_ports[1].link_layer = 1;
  p.rdma_ports[1].lid = 17;
  auto back = round_trip(p);
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->rdma_ports, p.rdma_ports);
  auto none = round_trip(peer_with_ports(0));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->rdma_ports.empty());
}

TEST(rdma_peer_wire, malformed_rdma_ports_are_refused) {
  EXPECT_TRUE(is(round_trip(peer_with_ports(rdma_devices_max + 1)).error(), errc::limit_exceeded));
  auto refused = [](auto change) {
    auto p = peer_with_ports(1);
    change(p.rdma_ports[0]);
    auto back = round_trip(p);
    EXPECT_FALSE(back);
    if (!back) {
      EXPECT_TRUE(is(back.error(), errc::invalid_argument)) << describe(back.error());
    }
  };
  refused([](rdma_port_info& r) { r.device.clear(); });
  refused([](rdma_port_info& r) { r.device.assign(64, 'x'); });
  refused([](rdma_port_info& r) { r.link_layer = 7; });
  refused([](rdma_port_info& r) { r.port = 0; });
  // A GID of the wrong size can only come from another writer: build one by hand.
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<wire::TransportPeer>();
  to_wire(peer_with_ports(1), root);
  root.getRdmaPorts()[0].initGid(15);
  EXPECT_TRUE(is(from_wire(root.asReader()).error(), errc::invalid_argument));
}

} // namespace
} // namespace crescent::transport::rdma
