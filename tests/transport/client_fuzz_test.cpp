// The TCP path's initiator against a peer that breaks the protocol at random: responses to
// requests never sent, sent twice or with the wrong length, bad magic, statuses that are no
// refusal, wrong read checksums, payloads changed under their checksum, payloads cut short,
// connections closed without an answer. It must end every operation by its deadline, with a
// reason where it did not complete; every read that completed holds the peer's bytes; and no
// byte of its memory outside the operations' buffers changes.
#include "loopback_server.hpp"
#include "messages/errors.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t remote_bytes = 16u << 20;
constexpr uint64_t op_bytes_max = 192u << 10;
constexpr uint64_t guard_bytes = 4096;
constexpr int batches = 150;

// The peer's region: every byte a function of its offset.
std::byte remote_byte(uint64_t at) {
  return std::byte(static_cast<uint8_t>(at * 131 + 17) ^ static_cast<uint8_t>(at >> 9));
}

// Serves the data plane's protocol, breaking it now and then, on every connection it accepts.
class unreliable_peer {
 public:
  explicit unreliable_peer(uint64_t seed)
      : server_([seed](int fd, uint64_t n) { serve(fd, seed + n); }) {}

  uint16_t port() const { return server_.port(); }

 private:
  static void serve(int fd, uint64_t seed) {
    std::mt19937_64 rng{seed};
    for (;;) {
      tcp::request_header req;
      if (tcp::read_full(fd, &req, sizeof(req)))
        return;
      std::vector<std::byte> payload(req.kind == tcp::kind_write ? req.length : 0);
      if (tcp::read_full(fd, payload.data(), payload.size()) || !answer(fd, req, rng)) {
        shutdown(fd, SHUT_RDWR);
        return;
      }
    }
  }

  // False: the connection ends here.
  static bool answer(int fd, const tcp::request_header& req, std::mt19937_64& rng) {
    tcp::response_header res;
    res.request_id = req.request_id;
    res.flags = req.flags;
    std::vector<std::byte> data;
    if (req.kind == tcp::kind_read) {
      res.length = req.length;
      data.resize(req.length);
      for (uint64_t i = 0; i < req.length; ++i)
        data[i] = remote_byte(req.handle_offset + req.offset + i);
      if ((req.flags & tcp::flag_checksum) != 0)
        res.checksum = XXH3_64bits(data.data(), data.size());
    }
    std::string message;
    bool twice = false;
    size_t cut = SIZE_MAX; // bytes of the answer sent before the connection is closed
    switch (rng() % 20) {
    case 0:
      res.request_id += 1000000; // a request never sent
      break;
    case 1:
      res.length += 1; // not the length asked for
      data.resize(res.length);
      break;
    case 2:
      res.magic = 0x12345678;
      break;
    case 3:
      res.status = static_cast<uint8_t>(errc::cancelled); // no refusal
      break;
    case 4:
      res.status = static_cast<uint8_t>(errc::out_of_range); // a refusal, with its reason
      message = "made up";
      res.message_bytes = static_cast<uint16_t>(message.size());
      res.length = 0;
      data.clear();
      break;
    case 5:
      res.checksum ^= 1; // for reads with checksums: the payload does not match
      break;
    case 6:
      cut = sizeof(res) + data.size() / 2;
      break;
    case 7:
      return false; // no answer at all
    case 8:
      twice = true;
      break;
    case 9: // a byte changed on the way, under the checksum of the true bytes
      if ((req.flags & tcp::flag_checksum) != 0 && !data.empty())
        data[rng() % data.size()] ^= std::byte{1};
      break;
    default:
      break; // a good answer
    }
    std::vector<std::byte> wire(sizeof(res) + message.size() + data.size());
    std::memcpy(wire.data(), &res, sizeof(res));
    std::memcpy(wire.data() + sizeof(res), message.data(), message.size());
    std::memcpy(wire.data() + sizeof(res) + message.size(), data.data(), data.size());
    for (int copies = twice ? 2 : 1; copies > 0; --copies) {
      iovec iov{wire.data(), std::min(cut, wire.size())};
      if (tcp::write_all(fd, &iov, 1) || cut != SIZE_MAX)
        return false;
    }
    return true;
  }

  loopback_server server_;
};

struct planned_op {
  transfer_op op;
  uint64_t at = 0; // of its buffer, in the initiator's memory
};

TEST(client_fuzz, a_peer_breaking_the_protocol_never_hangs_or_spills_an_operation) {
  unreliable_peer peer{20261203};
  transfer_options o;
  o.local_nodes = {2};
  o.enable_shm = false;
  o.enable_rdma = false;
  o.tcp_connections_per_peer = 2;
  o.tcp_slice_bytes = 32u << 10; // several slices per operation, on both connections
  auto engine = transfer_engine::create(o);
  ASSERT_TRUE(engine) << describe(engine.error());
  peer_info p;
  p.nodes = {1};
  p.host_id = "another host";
  p.tcp_host = "127.0.0.1";
  p.tcp_port = peer.port();
  ASSERT_FALSE((*engine)->add_peer(p));
  const region_handle remote{1, 1, 0, remote_bytes, 99};

  std::mt19937_64 rng{7};
  const std::byte fill{0xA5};
  std::vector<std::byte> memory(8 * (op_bytes_max + guard_bytes), fill);
  size_t completed = 0, failed = 0;
  for (int round = 0; round < batches; ++round) {
    // Up to 8 operations on disjoint buffers, with untouched guards between them.
    std::vector<planned_op> plan(1 + rng() % 8);
    std::vector<transfer_op> ops;
    for (size_t i = 0; i < plan.size(); ++i) {
      const uint64_t length = 1 + rng() % op_bytes_max;
      plan[i].at = i * (op_bytes_max + guard_bytes) + rng() % (guard_bytes / 2);
      const auto kind = rng() % 2 ? op_kind::read : op_kind::write;
      const uint64_t offset = rng() % (remote_bytes - length);
      plan[i].op = {kind, std::span{memory.data() + plan[i].at, length}, remote, offset};
      plan[i].op.checksum = rng() % 3 == 0;
      ops.push_back(plan[i].op);
    }
    const auto deadline = clock_type::now() + 5s;
    auto id = (*engine)->submit(ops, deadline);
    ASSERT_TRUE(id) << describe(id.error());
    auto results = (*engine)->wait(*id);
    ASSERT_TRUE(results) << describe(results.error());
    ASSERT_LT(clock_type::now(), deadline + 2s) << "round " << round << " outlived its deadline";
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto& r = results->at(i);
      const auto& op = plan[i].op;
      if (r.state != op_state::completed) {
        ++failed;
        EXPECT_TRUE(r.reason) << "round " << round << ": an operation ended without a reason";
      } else {
        ++completed;
        for (uint64_t b = 0; op.kind == op_kind::read && b < op.local.size(); ++b) {
          ASSERT_EQ(op.local[b], remote_byte(op.remote_offset + b))
              << "round " << round << ", op " << i << ", byte " << b;
        }
      }
    }
    // Outside the operations' buffers nothing changed; then the buffers are reset.
    std::vector<bool> inside(memory.size());
    for (const auto& planned : plan)
      std::fill_n(inside.begin() + planned.at, planned.op.local.size(), true);
    for (size_t b = 0; b < memory.size(); ++b) {
      if (!inside[b]) {
        ASSERT_EQ(memory[b], fill) << "round " << round << ": byte " << b << " outside every op";
      }
    }
    std::fill(memory.begin(), memory.end(), fill);
  }
  EXPECT_GT(completed, 0u);
  EXPECT_GT(failed, 0u);
}

} // namespace
} // namespace crescent::transport
