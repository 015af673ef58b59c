// The TCP path's buffered reader, over a socket pair: messages that arrive together come out
// whole and in order, whatever their sizes, and a closed peer is an error, not a short read.
#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/tcp/stream_reader.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace crescent::transport::tcp {
namespace {

struct socket_pair {
  int fd[2] = {-1, -1};
  socket_pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~socket_pair() {
    for (int f : fd)
      if (f >= 0)
        close(f);
  }
};

using crescent::testing::random_bytes;

TEST(stream_reader, messages_of_every_size_come_out_whole_and_in_order) {
  socket_pair p;
  // Small headers, payloads below and above the direct-read threshold, back to back.
  const std::vector<size_t> sizes{72, 32,     1,  72, 5000, 72,    stream_reader::buffer_bytes / 2,
                                  72, 300000, 32, 32, 32,   70000, 1,
                                  72};
  std::vector<std::vector<std::byte>> sent;
  for (size_t i = 0; i < sizes.size(); ++i)
    sent.push_back(random_bytes(sizes[i], i));
  std::thread writer([&] {
    for (const auto& m : sent) {
      size_t done = 0;
      while (done < m.size()) {
        auto n = ::write(p.fd[1], m.data() + done, m.size() - done);
        ASSERT_GT(n, 0);
        done += static_cast<size_t>(n);
      }
    }
  });
  stream_reader in{p.fd[0]};
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<std::byte> got(sizes[i]);
    auto err = in.read(got.data(), got.size());
    ASSERT_FALSE(err) << describe(err);
    EXPECT_EQ(got, sent[i]) << "message " << i;
  }
  writer.join();
  EXPECT_FALSE(in.has(1)) << "nothing left";
}

TEST(stream_reader, has_takes_in_what_is_there_without_waiting) {
  socket_pair p;
  stream_reader in{p.fd[0]};
  EXPECT_FALSE(in.has(72)) << "an empty socket: no wait";
  auto m = random_bytes(100, 7);
  ASSERT_EQ(::write(p.fd[1], m.data(), 50), 50);
  EXPECT_FALSE(in.has(72));
  ASSERT_EQ(::write(p.fd[1], m.data() + 50, 50), 50);
  EXPECT_TRUE(in.has(72));
  std::vector<std::byte> got(100);
  ASSERT_FALSE(in.read(got.data(), got.size()));
  EXPECT_EQ(got, m);
}

TEST(stream_reader, peek_shows_buffered_bytes_without_taking_them) {
  socket_pair p;
  stream_reader in{p.fd[0]};
  EXPECT_EQ(in.peek(1), nullptr) << "an empty socket: no wait";
  auto m = random_bytes(100, 9);
  ASSERT_EQ(::write(p.fd[1], m.data(), 30), 30);
  EXPECT_EQ(in.peek(72), nullptr);
  ASSERT_EQ(::write(p.fd[1], m.data() + 30, 70), 70);
  std::vector<std::byte> first(10);
  ASSERT_FALSE(in.read(first.data(), first.size()));
  const auto* seen = in.peek(72);
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(0, std::memcmp(seen, m.data() + 10, 72));
  std::vector<std::byte> rest(90);
  ASSERT_FALSE(in.read(rest.data(), rest.size()));
  EXPECT_EQ(rest, std::vector<std::byte>(m.begin() + 10, m.end()));
}

TEST(stream_reader, a_peer_that_closes_mid_message_is_an_io_error) {
  socket_pair p;
  auto m = random_bytes(40, 3);
  ASSERT_EQ(::write(p.fd[1], m.data(), m.size()), 40);
  close(p.fd[1]);
  p.fd[1] = -1;
  stream_reader in{p.fd[0]};
  std::vector<std::byte> got(72);
  auto err = in.read(got.data(), got.size());
  ASSERT_TRUE(err);
  EXPECT_TRUE(is(err, errc::io_error)) << describe(err);
}

} // namespace
} // namespace crescent::transport::tcp
