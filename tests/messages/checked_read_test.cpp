// Checked decoding turns every kind of damaged input into an error, never an exception.
#include "messages/checked_read.hpp"
#include "sample_messages.hpp"

#include <cstring>

namespace crescent::testing {
namespace {

auto read_job(const envelope& env, read_limits limits = {}) {
  return read_as<wire::PrefillJob>(
      env,
      [](wire::PrefillJob::Reader in) {
        uint64_t sum = in.getRequestId();
        for (auto t : in.getTokens())
          sum += t;
        for (auto k : in.getBlockKeys())
          sum += k.getHi() ^ k.getLo();
        for (auto p : in.getDecodePages())
          sum += p.getRegionId() + p.getOffset();
        return sum;
      },
      limits);
}

TEST(checked_read, intact_message_reads) {
  auto env = sample_envelope<wire::PrefillJob>();
  EXPECT_TRUE(read_job(env));
}

TEST(checked_read, empty_and_default_envelopes_are_errors) {
  envelope none;
  EXPECT_TRUE(is(read_job(none).error(), errc::malformed_message));
}

TEST(checked_read, wrong_schema_is_an_error) {
  auto env = sample_envelope<wire::KvReady>();
  EXPECT_TRUE(is(read_job(env).error(), errc::wrong_message_type));
}

TEST(checked_read, changed_bytes_fail_the_checksum) {
  auto env = sample_envelope<wire::PrefillJob>();
  for (size_t bit = 0; bit < env.size_bytes() * 8; bit += 13) {
    auto words = prefix_words(env, env.size_words());
    reinterpret_cast<uint8_t*>(words.begin())[bit / 8] ^= uint8_t(1u << (bit % 8));
    auto damaged = env.with_words(std::move(words));
    auto r = read_job(damaged);
    ASSERT_FALSE(r) << "bit " << bit;
    EXPECT_TRUE(is(r.error(), errc::message_checksum));
  }
}

TEST(checked_read, every_truncation_is_an_error) {
  auto env = sample_envelope<wire::PrefillJob>();
  for (size_t n = 0; n < env.size_words(); ++n) {
    auto r = read_job(reseal(env.schema_id(), prefix_words(env, n)));
    ASSERT_FALSE(r) << n << " of " << env.size_words() << " words";
    EXPECT_TRUE(is(r.error(), errc::malformed_message)) << describe(r.error());
  }
}

TEST(checked_read, every_single_bit_flip_is_survived) {
  // Resealed, so the structure itself is damaged: pointers out of bounds, wrong kinds, huge
  // list sizes. Each read must end as a value or an error, never an exception or a crash.
  auto env = sample_envelope<wire::PrefillJob>();
  size_t errors = 0;
  for (size_t bit = 0; bit < env.size_bytes() * 8; ++bit) {
    auto words = prefix_words(env, env.size_words());
    reinterpret_cast<uint8_t*>(words.begin())[bit / 8] ^= uint8_t(1u << (bit % 8));
    auto r = read_job(reseal(env.schema_id(), std::move(words)));
    errors += r ? 0 : 1;
  }
  EXPECT_GT(errors, 0u);
}

TEST(checked_read, traversal_limit_applies) {
  auto env = sample_envelope<wire::PrefillJob>();
  read_limits tight;
  tight.traversal_words = 4;
  auto r = read_job(env, tight);
  ASSERT_FALSE(r);
  EXPECT_TRUE(is(r.error(), errc::malformed_message));
}

TEST(checked_read, handler_errors_pass_through) {
  auto env = sample_envelope<wire::KvReady>();
  auto r = read_as<wire::KvReady>(env, [](wire::KvReady::Reader) {
    return caf::expected<int>{make_error(errc::invalid_argument, "no")};
  });
  ASSERT_FALSE(r);
  EXPECT_TRUE(is(r.error(), errc::invalid_argument));
}

} // namespace
} // namespace crescent::testing
