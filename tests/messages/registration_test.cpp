// Every message type round-trips through CAF's binary serializer with its contents compared: a
// type missing from register_types would arrive empty instead of failing.
#include "messages/checked_read.hpp"
#include "sample_messages.hpp"
#include "support/deterministic.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/message.hpp>
#include <capnp/dynamic.h>
#include <kj/string.h>

#include <cstring>

namespace crescent::testing {
namespace {

template <class T>
class registration : public ::testing::Test {};
TYPED_TEST_SUITE(registration, envelope_roots);

std::string text_of(const envelope& env, capnp::StructSchema schema) {
  capnp::FlatArrayMessageReader reader(env.words());
  return kj::str(reader.getRoot<capnp::DynamicStruct>(schema)).cStr();
}

TYPED_TEST(registration, envelope_round_trips_through_caf_serialization) {
  deterministic_system ds;
  auto original = sample_envelope<TypeParam>();
  auto msg = caf::make_message(original);
  std::vector<char> buf;
  caf::binary_serializer sink{ds.sys, buf};
  ASSERT_FALSE(sink(msg));
  // Schema id, checksum, count and words at least: a missing registration writes nothing.
  ASSERT_GT(buf.size(), original.size_bytes() + 24);

  caf::message copy;
  caf::binary_deserializer source{ds.sys, buf};
  ASSERT_FALSE(source(copy));
  // Back as the same type: CAF wrote the schema's own name before the bytes.
  ASSERT_TRUE(copy.match_elements<typed_envelope<TypeParam>>());
  const auto& back = copy.get_as<typed_envelope<TypeParam>>(0);
  EXPECT_EQ(back.schema_id(), original.schema_id());
  EXPECT_EQ(back.checksum(), original.checksum());
  ASSERT_EQ(back.size_bytes(), original.size_bytes());
  EXPECT_EQ(0, std::memcmp(back.words().begin(), original.words().begin(), back.size_bytes()));
  // And field by field, as a reader sees them.
  auto schema = capnp::Schema::from<TypeParam>();
  EXPECT_EQ(text_of(back, schema), text_of(original, schema));
  auto checked = read_as<TypeParam>(back, [](typename TypeParam::Reader) { return true; });
  EXPECT_TRUE(checked) << describe(checked.error());
}

TEST(registration, oversized_envelope_is_refused_on_deserialization) {
  deterministic_system ds;
  std::vector<char> buf;
  caf::binary_serializer sink{ds.sys, buf};
  uint64_t schema_id = 1, checksum = 2, count = envelope_words_max + 1;
  ASSERT_FALSE(sink(schema_id, checksum, count));
  envelope out;
  caf::binary_deserializer source{ds.sys, buf};
  auto err = source(out);
  EXPECT_TRUE(is(err, errc::limit_exceeded)) << describe(err);
}

TYPED_TEST(registration, envelope_in_finds_the_envelope_of_any_schema_in_a_message) {
  auto original = sample_envelope<TypeParam>();
  caf::message msg = caf::make_message(uint64_t{5}, original, std::string{"x"});
  const auto& content = msg.content();
  EXPECT_EQ(envelope_in(content, 0), nullptr);
  EXPECT_EQ(envelope_in(content, 2), nullptr);
  const auto* found = envelope_in(content, 1);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found, &msg.get_as<typed_envelope<TypeParam>>(1)) << "the element itself, no copy";
  EXPECT_EQ(found->schema_id(), capnp::typeId<TypeParam>());
}

TYPED_TEST(registration, each_schema_travels_under_its_own_name) {
  deterministic_system ds;
  EXPECT_EQ(ds.sys.types().portable_name(0, &typeid(typed_envelope<TypeParam>)),
            envelope_type_name_of<TypeParam>());
}

TEST(registration, a_typed_envelope_is_named_by_its_schema) {
  EXPECT_EQ(envelope_type_name_of<wire::PutStart>(), "crescent.envelope.PutStart");
}

TEST(registration, error_category_renders_context) {
  deterministic_system ds;
  auto err = make_error(errc::no_space, "pool full");
  EXPECT_EQ(ds.sys.render(err), "no_space: pool full");
}

} // namespace
} // namespace crescent::testing
