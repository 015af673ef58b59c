// The get combiner: gets that arrive while one is at the master leave together in the next
// request, and each thread gets its own keys' answers back. The master is played by the test
// (an `ask` that answers with a real GetReply once the test lets it), so the interleaving is
// fixed: no timing decides what is combined.
#include "apps/pool/get_combiner.hpp"
#include "messages/checked_read.hpp"
#include "support/block_keys.hpp"

#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <thread>

namespace crescent::pool {
namespace {

// The master's answer to a Get: block k has checksum k * 10 and one replica on node k % 7.
typed_envelope<wire::GetReply> answer(const typed_envelope<wire::Get>& get) {
  auto keys = read_as<wire::Get>(get, [](wire::Get::Reader in) {
    std::vector<uint64_t> out; // tests name block n by the key {0, n}
    for (auto k : in.getKeys())
      out.push_back(k.getLo());
    return out;
  });
  EXPECT_TRUE(keys);
  return make_envelope<wire::GetReply>([&](wire::GetReply::Builder out) {
    auto blocks = out.initBlocks(static_cast<unsigned>(keys->size()));
    for (unsigned i = 0; i < keys->size(); ++i) {
      const uint64_t k = (*keys)[i];
      write_key(blocks[i].initKey(), block_key{0, k});
      blocks[i].setSizeBytes(4096);
      blocks[i].setChecksum(k * 10);
      auto r = blocks[i].initReplicas(1);
      transport::to_wire(transport::region_handle{static_cast<uint32_t>(k % 7), 1, 0, 4096, 1},
                         r[0]);
    }
  });
}

void wait_for(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_TRUE(done());
}

TEST(get_combiner, gets_that_arrive_meanwhile_leave_together_and_get_their_own_answers) {
  get_combiner c;
  std::promise<void> release_first;
  auto first_may_answer = release_first.get_future().share();
  std::mutex sent_mutex;
  std::vector<size_t> sent; // keys per request, in order
  auto ask =
      [&](const typed_envelope<wire::Get>& msg) -> caf::expected<typed_envelope<wire::GetReply>> {
    size_t n = 0;
    {
      std::lock_guard guard{sent_mutex};
      n = sent.size();
      auto count =
          read_as<wire::Get>(msg, [](wire::Get::Reader in) { return in.getKeys().size(); });
      sent.push_back(count ? *count : 0);
    }
    if (n == 0)
      first_may_answer.wait(); // the first request stays at the "master" until released
    return answer(msg);
  };
  auto run = [&](std::initializer_list<uint64_t> numbers) {
    return std::async(std::launch::async,
                      [&c, &ask, keys = numbered_keys(numbers)] { return c.locate(keys, ask); });
  };
  auto a = run({1});
  wait_for([&] { return c.requests() == 1; }); // a leads, and waits at the master
  auto b = run({2, 3});
  auto d = run({4});
  wait_for([&] { return c.queued() == 2; });
  release_first.set_value();
  for (auto [f, want] :
       {std::pair{&a, std::vector<uint64_t>{1}}, std::pair{&b, std::vector<uint64_t>{2, 3}},
        std::pair{&d, std::vector<uint64_t>{4}}}) {
    auto got = f->get();
    ASSERT_TRUE(got) << describe(got.error());
    ASSERT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*got)[i].key, (block_key{0, want[i]}));
      EXPECT_EQ((*got)[i].checksum, want[i] * 10);
      ASSERT_EQ((*got)[i].replicas.size(), 1u);
      EXPECT_EQ((*got)[i].replicas[0].node, want[i] % 7);
    }
  }
  EXPECT_EQ(sent, (std::vector<size_t>{1, 3})) << "b's and d's gets went in one request";
  EXPECT_EQ(c.gets(), 3u);
  EXPECT_EQ(c.requests(), 2u);
}

TEST(get_combiner, a_failed_request_fails_every_get_it_carried_and_the_next_one_is_sent) {
  get_combiner c;
  int calls = 0;
  auto failing =
      [&](const typed_envelope<wire::Get>&) -> caf::expected<typed_envelope<wire::GetReply>> {
    ++calls;
    return make_error(errc::timeout, "no answer from the store master");
  };
  auto got = c.locate(numbered_keys({5, 6}), failing);
  ASSERT_FALSE(got);
  EXPECT_TRUE(is(got.error(), errc::timeout));
  auto again = c.locate(numbered_keys({7}), [](const typed_envelope<wire::Get>& m) {
    return caf::expected<typed_envelope<wire::GetReply>>{answer(m)};
  });
  ASSERT_TRUE(again) << describe(again.error());
  EXPECT_EQ((*again)[0].key, 7_key);
  EXPECT_EQ(calls, 1);
}

TEST(get_combiner, too_many_or_no_keys_are_refused_and_nothing_is_sent) {
  get_combiner c;
  int calls = 0;
  auto ask =
      [&](const typed_envelope<wire::Get>& m) -> caf::expected<typed_envelope<wire::GetReply>> {
    ++calls;
    return answer(m);
  };
  std::vector<block_key> many(get_combiner::keys_max + 1, 1_key);
  auto got = c.locate(many, ask);
  ASSERT_FALSE(got);
  EXPECT_TRUE(is(got.error(), errc::invalid_argument));
  got = c.locate({}, ask);
  ASSERT_FALSE(got);
  EXPECT_EQ(calls, 0);
}

TEST(get_combiner, a_request_that_throws_fails_its_gets_and_the_next_one_is_sent) {
  get_combiner c;
  auto throwing =
      [](const typed_envelope<wire::Get>&) -> caf::expected<typed_envelope<wire::GetReply>> {
    throw std::runtime_error("out of memory, say");
  };
  auto got = c.locate(numbered_keys({1}), throwing);
  ASSERT_FALSE(got);
  EXPECT_TRUE(is(got.error(), errc::internal));
  auto again = c.locate(numbered_keys({2}), [](const typed_envelope<wire::Get>& m) {
    return caf::expected<typed_envelope<wire::GetReply>>{answer(m)};
  });
  ASSERT_TRUE(again) << describe(again.error());
}

TEST(get_combiner, a_reply_of_the_wrong_length_is_an_error_not_a_shifted_answer) {
  get_combiner c;
  auto short_reply =
      [](const typed_envelope<wire::Get>&) -> caf::expected<typed_envelope<wire::GetReply>> {
    return answer(make_envelope<wire::Get>(
        [](wire::Get::Builder out) { write_key(out.initKeys(1)[0], 9_key); }));
  };
  auto got = c.locate(numbered_keys({1, 2}), short_reply);
  ASSERT_FALSE(got);
  EXPECT_TRUE(is(got.error(), errc::malformed_message));
}

} // namespace
} // namespace crescent::pool
