// The answer a typed actor gives, computed from its interface: reply_t<store_master_actor,
// stats_atom> is typed_envelope<wire::StoreStats>. For code that asks several kinds of actor the
// same question (stats) and must name each answer's type.
#pragma once

#include <caf/detail/type_list.hpp>
#include <caf/response_type.hpp>

namespace crescent {

template <class Handle, class... In>
using reply_t = typename caf::detail::tl_head<
    typename caf::response_type<typename Handle::signatures, In...>::type>::type;

} // namespace crescent
