// Every Cap'n Proto struct that travels as an envelope root, and a filler that sets every field
// of any of them to a non-default value through Cap'n Proto's dynamic API, so that tests cover
// fields added later without being edited.
#pragma once

#include "messages/envelope_schemas.hpp"

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <gtest/gtest.h>

namespace crescent::testing {

template <class List>
struct gtest_types_of;
template <class... Ts>
struct gtest_types_of<schema_list<Ts...>> {
  using type = ::testing::Types<Ts...>;
};

/// Every schema that travels as an envelope root (messages/envelope_schemas.hpp).
using envelope_roots = gtest_types_of<envelope_schemas>::type;

/// Sets every field of `s` (the first member of each union) to a value other than its default.
void fill_struct(capnp::DynamicStruct::Builder s, uint64_t seed, int depth = 0);

/// A sealed envelope of schema T with every field set.
template <class T>
typed_envelope<T> sample_envelope(uint64_t seed = 7) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<capnp::DynamicStruct>(capnp::Schema::from<T>());
  fill_struct(root, seed);
  return typed_envelope<T>::retype(envelope::seal(capnp::typeId<T>(), builder));
}

/// The first `count` words of an envelope, copied.
kj::Array<capnp::word> prefix_words(const envelope& env, size_t count);

/// Damaged bytes sealed with a matching checksum: what a buggy or hostile sender produces.
envelope reseal(uint64_t schema_id, kj::Array<capnp::word> words);

/// The envelope with one bit flipped and its original checksum kept.
envelope flip(const envelope& env, size_t bit);

} // namespace crescent::testing
