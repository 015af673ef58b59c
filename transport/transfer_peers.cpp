// The transfer engine's peers: what this engine tells others, the routes it learns from theirs,
// and its counters per path.
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"

namespace crescent::transport {

peer_info transfer_engine::self_info() const {
  peer_info info;
  info.nodes = impl_->options.local_nodes;
  info.host_id = impl_->host_id;
  info.pid = impl_->pid;
  if (impl_->tcp) {
    info.tcp_host = impl_->options.tcp_bind_host;
    info.tcp_port = impl_->tcp_port;
  }
  if (impl_->shm) {
    info.table_fd = impl_->table->fd();
    info.table_bytes = impl_->table->size_bytes();
  }
  if (impl_->rdma)
    impl_->rdma->advertise(info);
  return info;
}

std::vector<std::string> transfer_engine::paths(uint32_t node) const {
  std::vector<std::string> out;
  for (auto* b : impl_->paths_to(node))
    out.emplace_back(b->name());
  return out;
}

caf::error transfer_engine::rdma_status() const {
  return impl_->rdma ? caf::error{} : impl_->rdma_status;
}

caf::error transfer_engine::cuda_status() const {
  return impl_->cuda ? caf::error{} : impl_->cuda_status;
}

caf::error transfer_engine::add_peer(const peer_info& peer) {
  if (peer.nodes.empty())
    return make_error(errc::invalid_argument, "a peer must serve at least one node");
  for (auto n : peer.nodes)
    if (impl_->is_local(n))
      return make_error(errc::invalid_argument,
                        "node " + std::to_string(n) + " is served by this engine");
  auto r = std::make_shared<route>();
  r->info = peer;
  caf::error last;
  // Preference order: GPU copies on the same host (only for operations on GPU memory), shared
  // memory on the same host, then RDMA, then TCP.
  for (auto* b : {impl_->cuda.get(), impl_->shm.get(), impl_->rdma.get(), impl_->tcp.get()}) {
    if (b == nullptr)
      continue;
    if (auto err = b->add_peer(peer))
      last = std::move(err); // this path cannot reach it; others may
    else
      r->paths.push_back(b);
  }
  if (r->paths.empty())
    return last ? last : make_error(errc::unavailable, "no transfer path reaches the peer");
  std::unique_lock guard{impl_->routes_mutex};
  for (auto n : peer.nodes)
    impl_->routes[n] = r;
  return caf::none;
}

void transfer_engine::remove_peer(uint32_t node) {
  std::shared_ptr<const route> r;
  {
    std::unique_lock guard{impl_->routes_mutex};
    auto i = impl_->routes.find(node);
    if (i == impl_->routes.end())
      return;
    r = i->second;
    for (auto n : r->info.nodes)
      impl_->routes.erase(n);
  }
  for (auto* b : r->paths)
    b->remove_peer(node);
}

std::vector<path_metrics> transfer_engine::metrics() const {
  std::lock_guard guard{impl_->metrics_mutex};
  std::vector<path_metrics> out;
  for (const auto& [key, c] : impl_->counters)
    out.push_back({key.first, key.second, c->bytes_read.load(), c->bytes_written.load(),
                   c->operations.load(), c->slices.load(), c->retries.load(), c->failures.load()});
  return out;
}

} // namespace crescent::transport
