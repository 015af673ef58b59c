#include "messages/envelope.hpp"

#include "messages/errors.hpp"
#include "messages/xxh3.hpp"

#include <capnp/serialize.h>

#include <cassert>

namespace crescent {

namespace {

uint64_t hash_words(kj::ArrayPtr<const capnp::word> words) {
  return xxh3_64(words.begin(), words.size() * sizeof(capnp::word));
}

} // namespace

envelope envelope::seal(uint64_t schema_id, capnp::MessageBuilder& builder) {
  auto flat = capnp::messageToFlatArray(builder);
  assert(flat.size() <= envelope_words_max && "envelope above its size limit");
  envelope result;
  result.schema_id_ = schema_id;
  result.checksum_ = hash_words(flat.asPtr());
  result.words_ = std::make_shared<const kj::Array<capnp::word>>(std::move(flat));
  return result;
}

envelope envelope::from_wire(uint64_t schema_id, uint64_t checksum, kj::Array<capnp::word> words) {
  envelope result;
  result.schema_id_ = schema_id;
  result.checksum_ = checksum;
  result.words_ = std::make_shared<const kj::Array<capnp::word>>(std::move(words));
  return result;
}

kj::ArrayPtr<const capnp::word> envelope::words() const noexcept {
  if (!words_)
    return nullptr;
  return words_->asPtr();
}

bool envelope::checksum_ok() const noexcept {
  return hash_words(words()) == checksum_;
}

envelope envelope::with_words(kj::Array<capnp::word> words) const {
  return from_wire(schema_id_, checksum_, std::move(words));
}

caf::error save_envelope(caf::serializer& sink, const envelope& x) {
  uint64_t schema_id = x.schema_id();
  uint64_t checksum = x.checksum();
  uint64_t count = x.size_words();
  if (auto err = sink(schema_id, checksum, count))
    return err;
  if (count == 0)
    return caf::none;
  // apply_raw takes a non-const pointer for both directions; a serializer only reads it.
  auto* data = const_cast<capnp::word*>(x.words().begin());
  return sink.apply_raw(count * sizeof(capnp::word), data);
}

caf::error load_envelope(caf::deserializer& source, envelope& x) {
  uint64_t schema_id = 0;
  uint64_t checksum = 0;
  uint64_t count = 0;
  if (auto err = source(schema_id, checksum, count))
    return err;
  if (count > envelope_words_max)
    return make_error(errc::limit_exceeded, "envelope of " + std::to_string(count) +
                                                " words exceeds the limit of " +
                                                std::to_string(envelope_words_max));
  auto words = kj::heapArray<capnp::word>(count);
  if (count > 0)
    if (auto err = source.apply_raw(count * sizeof(capnp::word), words.begin()))
      return err;
  x = envelope::from_wire(schema_id, checksum, std::move(words));
  return caf::none;
}

} // namespace crescent
