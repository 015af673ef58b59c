#include "messages/registration.hpp"

#include "messages/envelope_schemas.hpp"
#include "messages/errors.hpp"

#include <caf/message.hpp>

namespace crescent {

namespace {

template <class... Ts>
void add_envelopes(caf::actor_system_config& cfg, schema_list<Ts...>) {
  (cfg.add_message_type<typed_envelope<Ts>>(envelope_type_name_of<Ts>()), ...);
}

} // namespace

void register_types(caf::actor_system_config& cfg) {
  add_envelopes(cfg, envelope_schemas{});
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           return describe(caf::error{code, error_category, ctx});
                         });
}

} // namespace crescent
