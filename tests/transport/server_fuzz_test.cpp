// The TCP data-plane server against hostile requests: valid ones with fields moved to and past
// every boundary, unknown kinds, bad magic, random flags and checksums, and plain garbage.
// Whatever comes in, the server answers or drops the connection (never hangs), keeps serving
// new connections, and changes no byte of its region except where a write it took lands; the
// bytes around the region never change. A model of the region, updated with each write the
// server took, must equal the region at the end.
//
// CRESCENT_FUZZ_ROUNDS requests per run (a few thousand by default; the `slow` build of this
// file runs many more). The seed is fixed: a failure is reproduced by running it again.
#include "messages/errors.hpp"
#include "transport/rdma/rdma_wire.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#ifndef CRESCENT_FUZZ_ROUNDS
#define CRESCENT_FUZZ_ROUNDS 3000
#endif

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t region_bytes = 256u << 10;
constexpr uint64_t guard_bytes = 64u << 10;
constexpr uint64_t payload_max = 128u << 10; // payloads this fuzzer sends, at most
constexpr uint64_t seed = 20261203;

class fuzzer {
 public:
  explicit fuzzer(uint64_t seed) : rng_(seed) {}

  // A value near one of the boundaries of [0, limit], or anywhere.
  uint64_t near(uint64_t limit) {
    switch (pick(8)) {
    case 0:
      return 0;
    case 1:
      return limit;
    case 2:
      return limit + 1;
    case 3:
      return limit - 1;
    case 4:
      return UINT64_MAX - pick(3);
    case 5:
      return (uint64_t{1} << 63) + pick(3);
    default:
      return pick(limit + 1);
    }
  }

  uint64_t pick(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(uint32_t percent) { return pick(100) < percent; }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

class server_fuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    transfer_options o;
    o.local_nodes = {1};
    o.enable_rdma = false;
    o.tcp_peer_silence_max = 2s;
    auto e = transfer_engine::create(o);
    ASSERT_TRUE(e) << describe(e.error());
    engine_ = *e;
    memory_.resize(guard_bytes + region_bytes + guard_bytes);
    for (size_t i = 0; i < memory_.size(); ++i)
      memory_[i] = std::byte(i * 31 + 7);
    model_.assign(memory_.begin(), memory_.end());
    auto h = engine_->register_region(1, memory_.data() + guard_bytes, region_bytes);
    ASSERT_TRUE(h) << describe(h.error());
    region_ = *h;
  }

  void TearDown() override {
    close_connection();
    engine_.reset(); // before memory_, which its region lies in
  }

  bool connect() {
    auto fd = tcp::connect_to("127.0.0.1", engine_->self_info().tcp_port, 2s);
    if (!fd)
      return false;
    fd_ = *fd;
    // The server answers at once or drops the connection: a wait past its silence limit (2 s)
    // is a server that waits for bytes the request never promised.
    tcp::set_receive_timeout(fd_, 3s);
    return true;
  }

  void close_connection() {
    if (fd_ >= 0)
      close(fd_);
    fd_ = -1;
  }

  // A well-formed request on a random part of the region; most are then spoiled in one to
  // three fields.
  tcp::request_header spoiled_request(fuzzer& f) {
    tcp::request_header req;
    req.kind = static_cast<uint8_t>(1 + f.pick(5));
    req.request_id = f.rng()();
    req.region_id = region_.region_id;
    req.access_key = region_.access_key;
    req.handle_offset = f.pick(region_bytes);
    req.handle_length = f.pick(region_bytes - req.handle_offset + 1);
    req.offset = f.pick(req.handle_length + 1);
    req.length = f.pick(std::min(req.handle_length - req.offset, payload_max) + 1);
    if (req.kind == tcp::kind_connect)
      req.length = sizeof(rdma::connect_request);
    if (req.kind == tcp::kind_release)
      req.length = sizeof(rdma::release_request);
    if (f.chance(30))
      req.flags = tcp::flag_checksum;
    req.checksum = f.rng()();
    for (auto spoils = f.chance(40) ? 0 : 1 + f.pick(3); spoils > 0; --spoils)
      spoil(f, req);
    return req;
  }

  void spoil(fuzzer& f, tcp::request_header& req) {
    switch (f.pick(13)) {
    case 0:
      req.magic = static_cast<uint32_t>(f.rng()());
      break;
    case 1:
      req.kind = static_cast<uint8_t>(f.pick(256));
      break;
    case 2:
      req.flags = static_cast<uint8_t>(f.pick(256));
      break;
    case 3:
      req.region_id ^= uint64_t{1} << f.pick(64);
      break;
    case 4:
      req.access_key = f.rng()();
      break;
    case 5:
      req.handle_offset = f.near(region_bytes);
      break;
    case 6:
      req.handle_length = f.near(region_bytes);
      break;
    case 7:
      req.offset = f.near(req.handle_length);
      break;
    case 8: // just past the end of the handle
      req.length = req.handle_length - std::min(req.offset, req.handle_length) + 1 + f.pick(4);
      break;
    case 10: // a slice just above the largest the server takes
      req.length = slice_bytes_max + 1 + f.pick(1u << 20);
      break;
    case 9: // a handle just past the end of the region
      req.handle_length = region_bytes - std::min(req.handle_offset, region_bytes) + 1 + f.pick(4);
      break;
    default:
      req.length = f.near(req.handle_length);
      break;
    }
  }

  // Sends one request (and the payload its kind and length call for) and reads the answer.
  // False: the server dropped the connection (allowed for malformed requests).
  bool exchange(fuzzer& f, tcp::request_header req) {
    const bool carries = req.kind == tcp::kind_write || req.kind == tcp::kind_connect ||
                         req.kind == tcp::kind_release;
    const bool dropped = req.magic != tcp::request_magic || req.kind == 0 || req.kind > 5 ||
                         (req.kind != tcp::kind_describe && req.length > slice_bytes_max);
    // A payload the server would wait for is sent whole; longer ones are not made (the server
    // drops the connection at their header instead, above slice_bytes_max).
    if (carries && !dropped && req.length > payload_max)
      req.length = f.pick(payload_max + 1);
    std::vector<std::byte> payload(carries && !dropped ? req.length : 0);
    for (auto& b : payload)
      b = std::byte(f.pick(256));
    if (req.kind == tcp::kind_write && (req.flags & tcp::flag_checksum) != 0 && f.chance(50))
      req.checksum = XXH3_64bits(payload.data(), payload.size());
    iovec iov[2] = {{&req, sizeof(req)}, {payload.data(), payload.size()}};
    if (tcp::write_all(fd_, iov, payload.empty() ? 1 : 2))
      return false; // dropped by an earlier request of this connection
    tcp::response_header res;
    const auto asked = std::chrono::steady_clock::now();
    auto err = tcp::read_full(fd_, &res, sizeof(res), true);
    if (err) {
      ++tally_.dropped;
      EXPECT_FALSE(is(err, errc::timeout)) << "the server hung: " << describe(err);
      // A drop comes at once; one after the server's silence limit (2 s) means it waited for
      // bytes the request never promised.
      EXPECT_LT(std::chrono::steady_clock::now() - asked, 1500ms) << "kind " << int{req.kind};
      EXPECT_TRUE(dropped || req.kind == tcp::kind_connect || req.kind == tcp::kind_release)
          << "a well-formed request lost its connection, kind " << int{req.kind};
      return false;
    }
    EXPECT_FALSE(dropped) << "a malformed request (kind " << int{req.kind} << ") was answered";
    EXPECT_EQ(res.magic, tcp::response_magic);
    EXPECT_EQ(res.request_id, req.request_id);
    std::vector<std::byte> rest(res.status != 0 ? res.message_bytes : res.length);
    EXPECT_LE(rest.size(), slice_bytes_max);
    if (rest.size() > slice_bytes_max || tcp::read_full(fd_, rest.data(), rest.size()))
      return false;
    ++(res.status == 0 ? tally_.answered : tally_.refused);
    check_answer(req, res, payload, rest);
    return true;
  }

  // Whether the request's handle and range are good for the region: the oracle, written apart
  // from the server's own check.
  bool in_bounds(const tcp::request_header& req) const {
    return req.region_id == region_.region_id && req.access_key == region_.access_key &&
           req.handle_offset <= region_bytes &&
           req.handle_length <= region_bytes - req.handle_offset &&
           req.offset <= req.handle_length && req.length <= req.handle_length - req.offset;
  }

  std::byte* modelled(const tcp::request_header& req) {
    return model_.data() + guard_bytes + req.handle_offset + req.offset;
  }

  // The answer to a request the server kept the connection for, against the oracle.
  void check_answer(const tcp::request_header& req, const tcp::response_header& res,
                    const std::vector<std::byte>& payload, const std::vector<std::byte>& rest) {
    const bool good = in_bounds(req);
    const bool summed = (req.flags & tcp::flag_checksum) != 0;
    switch (req.kind) {
    case tcp::kind_write:
      if (good && summed && req.checksum != XXH3_64bits(payload.data(), payload.size())) {
        // Found after the payload landed: the bytes are there, and the write is refused.
        EXPECT_EQ(res.status, static_cast<uint8_t>(errc::checksum_mismatch));
      } else {
        EXPECT_EQ(res.status == 0, good) << "a write " << (good ? "refused" : "taken");
        if (!good)
          return;
      }
      std::memcpy(modelled(req), payload.data(), payload.size());
      ++tally_.writes_taken;
      return;
    case tcp::kind_read:
      EXPECT_EQ(res.status == 0, good) << "a read " << (good ? "refused" : "served");
      if (!good || res.status != 0)
        return;
      ASSERT_EQ(rest.size(), req.length);
      EXPECT_EQ(0, std::memcmp(rest.data(), modelled(req), rest.size()))
          << "a read returned bytes the model does not hold";
      if (summed) {
        EXPECT_EQ(res.checksum, XXH3_64bits(rest.data(), rest.size()));
      }
      return;
    case tcp::kind_describe:
      EXPECT_EQ(res.status == 0, good) << "a describe " << (good ? "refused" : "answered");
      return;
    default: // connect and release: this engine has no RDMA device
      EXPECT_NE(res.status, 0);
      return;
    }
  }

  void send_garbage(fuzzer& f) {
    std::vector<std::byte> junk(1 + f.pick(512));
    for (auto& b : junk)
      b = std::byte(f.pick(256));
    iovec iov{junk.data(), junk.size()};
    [[maybe_unused]] auto err = tcp::write_all(fd_, &iov, 1);
    close_connection(); // what the server does with it is its business: it must live on
  }

  std::shared_ptr<transfer_engine> engine_;
  std::vector<std::byte> memory_; // guard, region, guard
  std::vector<std::byte> model_;  // what memory_ must hold
  region_handle region_;
  int fd_ = -1;
  struct {
    uint64_t answered = 0, refused = 0, dropped = 0, writes_taken = 0;
  } tally_; // how the requests fared: a fuzzer whose requests all fail one way tests little
};

TEST_F(server_fuzz, hostile_requests_change_nothing_but_what_writes_took) {
  fuzzer f{seed};
  for (int round = 0; round < CRESCENT_FUZZ_ROUNDS; ++round) {
    if (fd_ < 0) {
      ASSERT_TRUE(connect()) << "the server stopped taking connections at round " << round;
    }
    if (f.chance(2)) {
      send_garbage(f);
      continue;
    }
    if (!exchange(f, spoiled_request(f)))
      close_connection();
    if (::testing::Test::HasFailure())
      FAIL() << "at round " << round;
  }
  close_connection();
  EXPECT_GT(tally_.answered, CRESCENT_FUZZ_ROUNDS / 20);
  EXPECT_GT(tally_.refused, CRESCENT_FUZZ_ROUNDS / 20);
  EXPECT_GT(tally_.dropped, CRESCENT_FUZZ_ROUNDS / 100);
  EXPECT_GT(tally_.writes_taken, CRESCENT_FUZZ_ROUNDS / 100);
  std::printf("answered %llu, refused %llu, dropped %llu, writes taken %llu\n",
              static_cast<unsigned long long>(tally_.answered),
              static_cast<unsigned long long>(tally_.refused),
              static_cast<unsigned long long>(tally_.dropped),
              static_cast<unsigned long long>(tally_.writes_taken));
  // The region holds what the model says, and the guards around it are untouched.
  ASSERT_EQ(memory_.size(), model_.size());
  EXPECT_TRUE(std::memcmp(memory_.data(), model_.data(), memory_.size()) == 0);
  // A well-formed read of the whole region still works after all that.
  ASSERT_TRUE(connect());
  tcp::request_header req;
  req.kind = tcp::kind_read;
  req.request_id = 1;
  req.region_id = region_.region_id;
  req.access_key = region_.access_key;
  req.handle_offset = 0;
  req.handle_length = region_bytes;
  req.length = region_bytes;
  fuzzer quiet{1};
  ASSERT_TRUE(exchange(quiet, req));
}

} // namespace
} // namespace crescent::transport
