// The one CAF message type that carries a Cap'n Proto message.
//
// An envelope holds one sealed Cap'n Proto message as a single flat word array behind a shared
// pointer: copying an envelope (as CAF does when it fans a message out inside a process) shares
// the buffer and copies no bytes. Across processes CAF's serializer writes the schema id, the
// checksum, the word count and the raw words, and the receiver reads them back into one array.
//
// An envelope records the schema id of its root struct and an xxh3-64 checksum of its words,
// taken when it is sealed. Reading (see checked_read.hpp) verifies both before Cap'n Proto sees
// a byte, so a message changed in flight is refused with an error rather than misread.
#pragma once

#include <caf/deserializer.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>
#include <capnp/generated-header-support.h>
#include <capnp/message.h>
#include <kj/array.h>

#include <cstdint>
#include <memory>
#include <type_traits>

namespace crescent {

/// Largest envelope accepted from the wire or sealed locally: 64 MiB. KV bytes never travel in
/// envelopes, so anything near this is a bug or an attack.
inline constexpr uint64_t envelope_words_max = (64ull << 20) / sizeof(capnp::word);

class envelope {
 public:
  envelope() = default;

  /// Seals a finished builder whose root is of schema `schema_id`: copies its segments once into
  /// a flat array and records the checksum. Asserts the size limit (a programmer error).
  static envelope seal(uint64_t schema_id, capnp::MessageBuilder& builder);

  /// Wraps words that arrived from elsewhere; nothing is checked until the envelope is read.
  static envelope from_wire(uint64_t schema_id, uint64_t checksum, kj::Array<capnp::word> words);

  uint64_t schema_id() const noexcept { return schema_id_; }
  uint64_t checksum() const noexcept { return checksum_; }
  bool empty() const noexcept { return !words_ || words_->size() == 0; }
  size_t size_words() const noexcept { return words_ ? words_->size() : 0; }
  size_t size_bytes() const noexcept { return size_words() * sizeof(capnp::word); }
  kj::ArrayPtr<const capnp::word> words() const noexcept;

  /// True if the words still hash to the recorded checksum.
  bool checksum_ok() const noexcept;

  /// A copy whose words are `words` but whose schema id and checksum are kept: for tests and
  /// fault injection that need a damaged message.
  envelope with_words(kj::Array<capnp::word> words) const;

 private:
  uint64_t schema_id_ = 0;
  uint64_t checksum_ = 0;
  std::shared_ptr<const kj::Array<capnp::word>> words_;
};

/// An envelope whose schema is part of its type: what every actor interface takes and answers
/// (`caf::replies_to<put_start_atom, typed_envelope<wire::PutStart>>::with<...>`), so that a
/// message of the wrong schema fails to compile at the sender and at the handler. It adds no
/// data: the words, schema id and checksum are the envelope's, and reading still checks the
/// schema id, since bytes from another process are typed only by the name CAF read before them.
/// Each T is registered with CAF under its own name (envelope_schemas.hpp).
template <class T>
class typed_envelope : public envelope {
 public:
  using schema_type = T;

  typed_envelope() = default;

  /// Takes `env` as a T message without looking at it: for bytes made elsewhere (tests of bad
  /// input, fault injection). A wrong schema id is refused when it is read.
  static typed_envelope retype(envelope env) {
    typed_envelope out;
    static_cast<envelope&>(out) = std::move(env);
    return out;
  }
};

/// Seals a message of schema T whose root `fill` writes.
template <class T, class F>
typed_envelope<T> make_envelope(F&& fill) {
  capnp::MallocMessageBuilder builder;
  fill(builder.initRoot<T>());
  return typed_envelope<T>::retype(envelope::seal(capnp::typeId<T>(), builder));
}

caf::error save_envelope(caf::serializer& sink, const envelope& x);
caf::error load_envelope(caf::deserializer& source, envelope& x);

/// CAF 0.17 inspection: binary serialization writes the raw words; to_string shows a summary.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, envelope& x) {
  if constexpr (std::is_same_v<typename Inspector::result_type, void>) {
    f(caf::meta::type_name("envelope"), x.schema_id(), x.size_bytes());
  } else if constexpr (Inspector::reads_state) {
    return save_envelope(f, x);
  } else {
    return load_envelope(f, x);
  }
}

template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, typed_envelope<T>& x) {
  return inspect(f, static_cast<envelope&>(x));
}

} // namespace crescent
