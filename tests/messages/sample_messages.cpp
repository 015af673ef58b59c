#include "sample_messages.hpp"

#include <xxhash.h>

#include <cstring>

namespace crescent::testing {

namespace {

capnp::DynamicValue::Reader scalar_for(capnp::Type type, uint64_t seed) {
  using capnp::schema::Type;
  switch (type.which()) {
  case Type::BOOL:
    return true;
  case Type::INT8:
    return static_cast<int8_t>(-(seed % 100) - 1);
  case Type::INT16:
    return static_cast<int16_t>(-(seed % 1000) - 1);
  case Type::INT32:
    return static_cast<int32_t>(-(seed % 100000) - 1);
  case Type::INT64:
    return -static_cast<int64_t>(seed * 1000003 + 1);
  case Type::UINT8:
    return static_cast<uint8_t>(seed % 200 + 1);
  case Type::UINT16:
    return static_cast<uint16_t>(seed % 60000 + 1);
  case Type::UINT32:
    return static_cast<uint32_t>(seed * 7919 + 1);
  case Type::UINT64:
    return seed * 0x9e3779b97f4a7c15ull + 1;
  case Type::FLOAT32:
    return 1.5f + static_cast<float>(seed);
  case Type::FLOAT64:
    return 2.5 + static_cast<double>(seed);
  case Type::ENUM: {
    auto e = type.asEnum().getEnumerants();
    return capnp::DynamicEnum(e[e.size() - 1]);
  }
  default:
    return capnp::DynamicValue::Reader();
  }
}

void fill_field(capnp::DynamicStruct::Builder s, capnp::StructSchema::Field f, uint64_t seed,
                int depth) {
  using capnp::schema::Type;
  auto type = f.getType();
  switch (type.which()) {
  case Type::VOID:
    s.set(f, capnp::VOID);
    break;
  case Type::TEXT:
    s.set(f, capnp::Text::Reader("sample text"));
    break;
  case Type::DATA: {
    const capnp::byte bytes[] = {1, 2, 3};
    s.set(f, capnp::Data::Reader(bytes, 3));
    break;
  }
  case Type::STRUCT:
    fill_struct(s.init(f).as<capnp::DynamicStruct>(), seed + 1, depth + 1);
    break;
  case Type::LIST: {
    auto list = s.init(f, 3).as<capnp::DynamicList>();
    auto elem = type.asList().getElementType();
    for (unsigned i = 0; i < list.size(); ++i) {
      if (elem.isStruct())
        fill_struct(list[i].as<capnp::DynamicStruct>(), seed + i + 2, depth + 1);
      else if (elem.isText())
        list.set(i, capnp::Text::Reader("item"));
      else
        list.set(i, scalar_for(elem, seed + i + 2));
    }
    break;
  }
  default:
    s.set(f, scalar_for(type, seed));
    break;
  }
}

} // namespace

void fill_struct(capnp::DynamicStruct::Builder s, uint64_t seed, int depth) {
  ASSERT_LT(depth, 8) << "schemas nest deeper than the filler expects";
  auto schema = s.getSchema();
  for (auto f : schema.getNonUnionFields())
    fill_field(s, f, seed, depth);
  auto unions = schema.getUnionFields();
  if (unions.size() > 0)
    fill_field(s, unions[0], seed, depth);
}

kj::Array<capnp::word> prefix_words(const envelope& env, size_t count) {
  auto out = kj::heapArray<capnp::word>(count);
  std::memcpy(out.begin(), env.words().begin(), count * sizeof(capnp::word));
  return out;
}

envelope reseal(uint64_t schema_id, kj::Array<capnp::word> words) {
  auto sum = XXH3_64bits(words.begin(), words.size() * sizeof(capnp::word));
  return envelope::from_wire(schema_id, sum, std::move(words));
}

envelope flip(const envelope& env, size_t bit) {
  auto words = prefix_words(env, env.size_words());
  reinterpret_cast<uint8_t*>(words.begin())[bit / 8] ^= uint8_t(1u << (bit % 8));
  return env.with_words(std::move(words));
}

} // namespace crescent::testing
