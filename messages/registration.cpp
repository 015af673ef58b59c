#include "messages/registration.hpp"

#include "messages/envelope.hpp"
#include "messages/errors.hpp"

#include <caf/message.hpp>

namespace crescent {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<envelope>(envelope_type_name);
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           return describe(caf::error{code, error_category, ctx});
                         });
}

} // namespace crescent
