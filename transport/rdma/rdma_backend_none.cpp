// The RDMA path of a binary built without rdma-core: there is none, and engines say why.
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"

namespace crescent::transport {

caf::expected<std::unique_ptr<backend>> make_rdma_backend(transfer_engine::impl&) {
  return make_error(errc::unavailable, "this binary was built without rdma-core");
}

} // namespace crescent::transport
