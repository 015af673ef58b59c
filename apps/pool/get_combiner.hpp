// Combines the gets that threads of one process ask of the same store master at the same time:
// while one Get is at the master, the others queue, and the next Get carries all of them. A
// process serving many requests then pays one round trip per batch of concurrent gets instead
// of one per get (a round trip through CAF's middleman costs more CPU here than copying and
// hashing a 512 KiB block). Each block still gets its own lease, replicas and checksum.
//
// The thread whose get finds nothing in flight becomes the leader: it asks for every queued
// get with its own `ask` and hands each waiter its share of the answer (or the error). No
// thread of its own; a get waits for at most the request in flight and its own.
#pragma once

#include "actors/store_master/pool_protocol.hpp"
#include "messages/errors.hpp"

#include <caf/expected.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

namespace crescent::pool {

class get_combiner {
 public:
  /// Keys in one combined Get, at most (the store master refuses more).
  static constexpr size_t keys_max = 4096;

  /// Sends one Get envelope to the master and waits for its reply, on the calling thread.
  using ask_fn = std::function<caf::expected<typed_envelope<wire::GetReply>>(
      const typed_envelope<wire::Get>&)>;

  /// Where `keys` are (in order), asked together with whatever other threads ask meanwhile.
  /// invalid_argument unless `keys` holds 1 to keys_max keys.
  caf::expected<std::vector<pool_protocol::block_location>> locate(std::span<const block_key> keys,
                                                                   const ask_fn& ask);

  /// Gets sent, and Get requests that carried them (for the benchmark's report).
  uint64_t gets() const;
  uint64_t requests() const;
  /// Gets waiting for the request in flight to come back.
  size_t queued() const;

 private:
  struct waiter {
    std::span<const block_key> keys;
    caf::expected<std::vector<pool_protocol::block_location>> result =
        make_error(errc::unavailable, "not answered yet");
    bool done = false;
  };

  void lead(std::unique_lock<std::mutex>& guard, const ask_fn& ask);

  mutable std::mutex mutex_;
  std::condition_variable answered_;
  std::deque<waiter*> queue_; // not yet sent, oldest first
  bool in_flight_ = false;
  uint64_t gets_ = 0;
  uint64_t requests_ = 0;
};

} // namespace crescent::pool
