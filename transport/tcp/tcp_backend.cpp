// The TCP path: the engine's data-plane server for its own regions, and pools of client
// connections to each peer's server. Slices of one operation spread over a peer's connections.
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/tcp/tcp_server.hpp"
#include "transport/thread_name.hpp"

#include <algorithm>
#include <iterator>

namespace crescent::transport {

namespace {

struct tcp_peer {
  peer_info info;
  std::mutex mutex;
  std::vector<std::shared_ptr<tcp::connection>> connections; // fixed size; broken ones replaced
  uint32_t next = 0;
  bool retired = false; // replaced or removed: opens no more connections
};

class tcp_backend final : public backend {
 public:
  tcp_backend(transfer_engine::impl& engine, std::unique_ptr<tcp::server> server)
      : engine_(engine), server_(std::move(server)) {
    reaper_ = named_thread("tcp-reaper", [this] { reap_loop(); });
  }

  ~tcp_backend() override { stop(); }

  const char* name() const override { return "tcp"; }

  caf::error add_peer(const peer_info& info) override {
    if (info.tcp_port == 0 || info.tcp_host.empty())
      return make_error(errc::unavailable, "the peer runs no TCP data-plane server");
    auto p = std::make_shared<tcp_peer>();
    p->info = info;
    p->connections.resize(engine_.options.tcp_connections_per_peer);
    std::vector<std::shared_ptr<tcp_peer>> replaced;
    {
      std::unique_lock guard{mutex_};
      if (same_server(info))
        return caf::none; // the same server again: its connections are kept
      for (auto n : info.nodes) {
        if (auto i = peers_.find(n); i != peers_.end())
          replaced.push_back(i->second);
        peers_[n] = p;
      }
      // A replaced process that still serves other nodes keeps its connections for them.
      std::erase_if(replaced, [&](const std::shared_ptr<tcp_peer>& old) {
        return std::any_of(peers_.begin(), peers_.end(),
                           [&](const auto& kv) { return kv.second == old; });
      });
    }
    // Outside the lock, and never joined here: a replaced connection's threads may be retrying
    // their slices (which takes the lock), and this may be one of those threads.
    for (auto& old : replaced)
      retire_all(*old);
    return caf::none;
  }

  void remove_peer(uint32_t node) override {
    std::shared_ptr<tcp_peer> p;
    {
      std::unique_lock guard{mutex_};
      auto i = peers_.find(node);
      if (i == peers_.end())
        return;
      p = i->second;
      for (auto n : p->info.nodes)
        peers_.erase(n);
    }
    retire_all(*p); // its slices fail on the reaper's thread (this may be one of theirs)
  }

  void start(slice_record& s) override {
    // corrupt: a read's bytes change on arrival (tcp_connection_receive.cpp); a checksummed
    // write's payload fails its check at the receiver (tcp_connection_send.cpp).
    if (injected_failure(s))
      return;
    auto p = find(s.remote.node);
    for (size_t tries = 0; p && tries <= p->connections.size(); ++tries) {
      auto c = pick(*p, s.remote.node);
      if (!c) { // replaced meanwhile: its successor, if any, takes the slice
        p = find(s.remote.node);
        continue;
      }
      if (c->enqueue(s))
        return;
    }
    if (!p)
      return complete_slice(s, make_error(errc::unavailable,
                                          "no TCP route to node " + std::to_string(s.remote.node)));
    complete_slice(s, make_error(errc::io_error,
                                 "no usable connection to node " + std::to_string(s.remote.node)));
  }

  void flush(const batch_state& b) override {
    std::vector<uint32_t> nodes; // a batch reaches few nodes: one lookup each
    for (const auto& op : b.ops)
      if (std::find(nodes.begin(), nodes.end(), op->op.remote.node) == nodes.end())
        nodes.push_back(op->op.remote.node);
    std::vector<std::shared_ptr<tcp_peer>> peers;
    for (auto n : nodes)
      if (auto p = find(n); p && std::find(peers.begin(), peers.end(), p) == peers.end())
        peers.push_back(std::move(p));
    for (auto& p : peers)
      for (auto& c : connections_of(*p))
        c->flush();
  }

  void expire(batch_state& b) override {
    // Outside the peer's lock: expire() ends queued slices, and a batch's callback may run
    // from there and submit to this peer again.
    for (auto& p : all_peers())
      for (auto& c : connections_of(*p))
        c->expire(b);
  }

  void stop() override {
    if (server_)
      server_->stop();
    for (auto& p : all_peers())
      close_all(*p);
    {
      std::lock_guard guard{graveyard_mutex_};
      stopping_ = true;
    }
    graveyard_cv_.notify_all();
    if (reaper_.joinable())
      reaper_.join();
  }

 private:
  // Round robin over the peer's connections, opening or replacing one as needed; null once the
  // peer is retired.
  std::shared_ptr<tcp::connection> pick(tcp_peer& p, uint32_t node) {
    std::shared_ptr<tcp::connection> old;
    std::shared_ptr<tcp::connection> chosen;
    {
      std::lock_guard guard{p.mutex};
      if (p.retired)
        return nullptr;
      auto& slot = p.connections[p.next++ % p.connections.size()];
      if (!slot || slot->broken()) {
        old = std::move(slot);
        slot = std::make_shared<tcp::connection>(p.info.tcp_host, p.info.tcp_port, node,
                                                 engine_.options.connect_timeout);
      }
      chosen = slot;
    }
    if (old)
      bury(std::move(old));
    return chosen;
  }

  // A replaced connection may still be finishing on its own threads, and this may be one of
  // them: it is destroyed (its threads joined) on the reaper thread only, once nothing else
  // holds it (a thread of its own may, for a moment, while it retries a slice).
  void bury(std::shared_ptr<tcp::connection> c) {
    {
      std::lock_guard guard{graveyard_mutex_};
      graveyard_.push_back(std::move(c));
    }
    graveyard_cv_.notify_all();
  }

  void reap_loop() {
    std::unique_lock guard{graveyard_mutex_};
    bool held = false; // some buried connection was still held elsewhere: look again soon
    for (;;) {
      if (held)
        graveyard_cv_.wait_for(guard, std::chrono::milliseconds(10));
      else
        graveyard_cv_.wait(guard, [&] { return stopping_ || !graveyard_.empty(); });
      // Unreachable from any slot, a connection held only here stays so: it is safe to end.
      std::vector<std::shared_ptr<tcp::connection>> dead;
      auto unshared = std::partition(graveyard_.begin(), graveyard_.end(),
                                     [](const auto& c) { return c.use_count() > 1; });
      std::move(unshared, graveyard_.end(), std::back_inserter(dead));
      graveyard_.erase(unshared, graveyard_.end());
      held = !graveyard_.empty();
      guard.unlock();
      dead.clear(); // joins their threads, outside the lock
      guard.lock();
      if (stopping_ && graveyard_.empty())
        return;
    }
  }

  // Whether every node of `info` is already reached through the same process's server.
  // Called with mutex_ held.
  bool same_server(const peer_info& info) const {
    return std::all_of(info.nodes.begin(), info.nodes.end(), [&](uint32_t n) {
      auto i = peers_.find(n);
      return i != peers_.end() && i->second->info.tcp_host == info.tcp_host &&
             i->second->info.tcp_port == info.tcp_port && i->second->info.pid == info.pid;
    });
  }

  // The peer's open connections now, to use outside its lock.
  static std::vector<std::shared_ptr<tcp::connection>> connections_of(tcp_peer& p) {
    std::vector<std::shared_ptr<tcp::connection>> conns;
    {
      std::lock_guard guard{p.mutex};
      conns = p.connections;
    }
    std::erase(conns, nullptr);
    return conns;
  }

  // Retires the peer (it opens no more connections) and takes its connections out.
  std::vector<std::shared_ptr<tcp::connection>> take_all(tcp_peer& p) {
    std::vector<std::shared_ptr<tcp::connection>> conns;
    std::lock_guard guard{p.mutex};
    p.retired = true;
    conns.swap(p.connections);
    p.connections.resize(conns.size());
    std::erase(conns, nullptr);
    return conns;
  }

  // Hands the peer's connections to the reaper: their slices fail over to new connections
  // (to wherever the peer's nodes are reached now).
  void retire_all(tcp_peer& p) {
    for (auto& c : take_all(p))
      bury(std::move(c));
  }

  // Stops the peer's connections on this thread (the engine is stopping).
  void close_all(tcp_peer& p) {
    for (auto& c : take_all(p))
      c->stop();
  }

  std::shared_ptr<tcp_peer> find(uint32_t node) {
    std::shared_lock guard{mutex_};
    auto i = peers_.find(node);
    return i == peers_.end() ? nullptr : i->second;
  }

  std::vector<std::shared_ptr<tcp_peer>> all_peers() {
    std::shared_lock guard{mutex_};
    std::vector<std::shared_ptr<tcp_peer>> out;
    for (auto& kv : peers_)
      if (std::find(out.begin(), out.end(), kv.second) == out.end())
        out.push_back(kv.second);
    return out;
  }

  transfer_engine::impl& engine_;
  std::unique_ptr<tcp::server> server_;
  std::shared_mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<tcp_peer>> peers_;
  std::mutex graveyard_mutex_;
  std::condition_variable graveyard_cv_;
  std::vector<std::shared_ptr<tcp::connection>> graveyard_;
  bool stopping_ = false;
  std::thread reaper_;
};

} // namespace

caf::expected<std::unique_ptr<backend>> make_tcp_backend(transfer_engine::impl& engine) {
  auto server =
      tcp::server::start(*engine.table, engine.options.tcp_bind_host, engine.options.tcp_port,
                         engine.options.tcp_peer_silence_max, engine.rdma_responder);
  if (!server)
    return std::move(server.error());
  engine.tcp_port = (*server)->port();
  return std::unique_ptr<backend>{new tcp_backend(engine, std::move(*server))};
}

} // namespace crescent::transport
