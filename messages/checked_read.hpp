// Checked decoding: the only way Crescent code reads an envelope.
//
// read_as<T>(env, fn) verifies the schema id and checksum, opens the words with explicit reader
// limits, and calls fn(T::Reader) inside a try block. Cap'n Proto reports malformed input by
// throwing kj::Exception (a pointer out of bounds, a traversal or nesting limit hit, a list of
// the wrong kind); those become errc::malformed_message here and never leave the handler. fn
// should only copy what it needs out of the reader (into a plain struct, with its own range
// checks) and act after read_as returns, so that a message failing halfway changes nothing.
#pragma once

#include "messages/envelope.hpp"
#include "messages/errors.hpp"

#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <exception>
#include <string>
#include <type_traits>
#include <vector>

namespace crescent {

struct read_limits {
  /// Words the reader may visit in total; stops amplification through shared pointers.
  uint64_t traversal_words = 1u << 22; // 32 MiB
  /// Depth of nested structs and lists; our schemas are at most 4 deep.
  int nesting_depth = 16;
};

namespace detail {

template <class R>
struct is_expected : std::false_type {};
template <class V>
struct is_expected<caf::expected<V>> : std::true_type {};

caf::error check_envelope(const envelope& env, uint64_t schema_id, const char* schema_name);

} // namespace detail

template <class T, class F>
auto read_as(const envelope& env, F&& fn, read_limits limits = {}) {
  using raw = std::invoke_result_t<F, typename T::Reader>;
  using result_type = std::conditional_t<detail::is_expected<raw>::value, raw, caf::expected<raw>>;
  if (auto err = detail::check_envelope(env, capnp::typeId<T>(),
                                        capnp::Schema::from<T>().getShortDisplayName().cStr()))
    return result_type{std::move(err)};
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = limits.traversal_words;
    options.nestingLimit = limits.nesting_depth;
    capnp::FlatArrayMessageReader reader(env.words(), options);
    return result_type{fn(reader.getRoot<T>())};
  } catch (const kj::Exception& ex) {
    return result_type{make_error(errc::malformed_message,
                                  std::string{"cannot decode "} +
                                      capnp::Schema::from<T>().getShortDisplayName().cStr() + ": " +
                                      ex.getDescription().cStr())};
  } catch (const std::exception& ex) {
    return result_type{make_error(errc::malformed_message, ex.what())};
  }
}

/// Reading a typed envelope as the schema its type names: reading it as another fails to compile.
template <class T, class U, class F>
auto read_as(const typed_envelope<U>& env, F&& fn, read_limits limits = {}) {
  static_assert(std::is_same_v<T, U>, "this envelope carries another schema");
  return read_as<T>(static_cast<const envelope&>(env), std::forward<F>(fn), limits);
}

} // namespace crescent

namespace crescent {

/// Copies a Cap'n Proto list of primitives into a vector (its iterators do not satisfy the
/// standard iterator requirements that std::vector's range constructor needs).
template <class List>
auto to_vector(List list) {
  using element = std::decay_t<decltype(list[0])>;
  static_assert(std::is_arithmetic_v<element> || std::is_enum_v<element>,
                "to_vector copies primitives; a list of structs is read by its own helper "
                "(to_keys for block keys)");
  std::vector<element> out;
  out.reserve(list.size());
  for (auto x : list)
    out.push_back(x);
  return out;
}

/// The other way: fills a list builder of primitives, initialised by the caller to
/// values.size() (e.g. `copy_to(out.initTokens(n), tokens)`).
template <class ListBuilder, class Values>
void copy_to(ListBuilder list, const Values& values) {
  unsigned i = 0;
  for (const auto& v : values)
    list.set(i++, v);
}

} // namespace crescent
