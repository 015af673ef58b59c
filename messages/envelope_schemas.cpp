#include "messages/envelope_schemas.hpp"

#include <typeindex>
#include <unordered_map>

namespace crescent {

namespace {

using view_fn = const envelope* (*)(const void*);

template <class T>
const envelope* view_as(const void* element) {
  return static_cast<const typed_envelope<T>*>(element);
}

template <class... Ts>
std::unordered_map<std::type_index, view_fn> views_of(schema_list<Ts...>) {
  std::unordered_map<std::type_index, view_fn> out;
  (out.emplace(std::type_index{typeid(typed_envelope<Ts>)}, &view_as<Ts>), ...);
  return out;
}

// The same, by the address of each type's std::type_info: no hashing of mangled names on the
// simulator's path (every element of every message). A type_info at another address (a copy
// in another shared object) falls back to the lookup by name.
template <class... Ts>
std::unordered_map<const std::type_info*, view_fn> views_by_address(schema_list<Ts...>) {
  std::unordered_map<const std::type_info*, view_fn> out;
  (out.emplace(&typeid(typed_envelope<Ts>), &view_as<Ts>), ...);
  return out;
}

} // namespace

const envelope* envelope_in(const caf::type_erased_tuple& content, size_t i) {
  static const auto by_address = views_by_address(envelope_schemas{});
  static const auto by_name = views_of(envelope_schemas{});
  auto type = content.type(i);
  if (type.first != 0 || type.second == nullptr)
    return nullptr; // one of CAF's builtin types
  if (auto view = by_address.find(type.second); view != by_address.end())
    return view->second(content.get(i));
  auto view = by_name.find(std::type_index{*type.second});
  return view != by_name.end() ? view->second(content.get(i)) : nullptr;
}

} // namespace crescent
