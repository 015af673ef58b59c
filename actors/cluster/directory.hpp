// Where every actor of a cluster is. A process's actors share one directory_cell: bring-up
// publishes the directory into it before the first request, and a node process that rejoins
// after its first process was lost (cluster::rejoin_node) gets its new actors published there
// too. Actors read the current snapshot while handling a message (directory_ref).
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/conductor/conductor_actor.hpp"
#include "actors/coupled_worker/coupled_worker_actor.hpp"
#include "actors/decode_worker/decode_worker_actor.hpp"
#include "actors/node_agent/node_agent_actor.hpp"
#include "actors/prefill_worker/prefill_worker_actor.hpp"
#include "actors/store_master/store_master_actor.hpp"

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/error.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace crescent {

struct directory {
  conductor_actor conductor;
  store_master_actor store_master;
  std::vector<block_owner_actor> block_owners; // index: node id
  std::vector<node_agent_actor> node_agents;   // index: node id
  std::vector<prefill_worker_actor> prefill;   // index: prefill instance id
  std::vector<decode_worker_actor> decode;     // index: decode instance id
  std::vector<uint32_t> prefill_node;          // node of each prefill instance
  std::vector<uint32_t> decode_node;           // node of each decode instance
  // A coupled cluster's instances (no prefill or decode ones then): the conductor numbers them
  // as prefill and decode instances alike, index i being coupled instance i.
  std::vector<coupled_worker_actor> coupled;
  std::vector<uint32_t> coupled_node;
};

/// The published directories of one process. A snapshot, once published, is neither changed
/// nor freed while the cell lives: a reference taken from one stays valid (an actor may hold
/// one across a handler), and a handle it names may only be stale (a node that was lost, whose
/// messages go nowhere). Readers never wait; writers (bring-up, a rejoin, a node agent taking
/// the directory) are serialised. There is a limit on snapshots, since none is freed.
class directory_cell {
 public:
  static constexpr size_t snapshots_max = 4096;

  directory_cell() : directory_cell(directory{}) {}
  explicit directory_cell(directory first);
  directory_cell(const directory_cell&) = delete;
  directory_cell& operator=(const directory_cell&) = delete;

  /// The latest snapshot published.
  const directory& current() const { return *current_.load(std::memory_order_acquire); }

  /// Publishes `next`: readers see it from their next read. limit_exceeded, publishing
  /// nothing, once snapshots_max are held.
  caf::error publish(directory next);

  /// Publishes a copy of the current snapshot as `change` leaves it, as one step against
  /// other writers.
  template <class Change>
  caf::error update(Change&& change) {
    std::lock_guard guard{write_mutex_};
    directory next = current();
    change(next);
    return publish_locked(std::move(next));
  }

  /// How many snapshots were published, the first included.
  size_t snapshots() const;

 private:
  caf::error publish_locked(directory next);

  std::mutex write_mutex_; // writers: one update or publish at a time
  mutable std::mutex snapshots_mutex_;
  std::vector<std::unique_ptr<const directory>> snapshots_;
  std::atomic<const directory*> current_;
};

/// What an actor holds of its process's directory: the cell, read as its current snapshot.
class directory_ref {
 public:
  directory_ref() = default;
  directory_ref(std::shared_ptr<directory_cell> cell) : cell_(std::move(cell)) {}
  /// A cell of its own holding `first`: for actors built outside a cluster (tests, benches).
  static directory_ref of(directory first) {
    return {std::make_shared<directory_cell>(std::move(first))};
  }

  const directory* operator->() const { return &cell_->current(); }
  const directory& operator*() const { return cell_->current(); }
  explicit operator bool() const { return cell_ != nullptr; }
  const std::shared_ptr<directory_cell>& cell() const { return cell_; }

 private:
  std::shared_ptr<directory_cell> cell_;
};

/// Handles as they travel between processes (caf::actor needs no type registration), and back.
template <class Handle>
std::vector<caf::actor> untyped(const std::vector<Handle>& handles) {
  std::vector<caf::actor> out;
  out.reserve(handles.size());
  for (const auto& h : handles)
    out.push_back(caf::actor_cast<caf::actor>(h));
  return out;
}

/// Stores `handles` as `Handle`s into `out` from index `first` on.
template <class Handle>
void place_typed(const std::vector<caf::actor>& handles, std::vector<Handle>& out, size_t first) {
  for (size_t k = 0; k < handles.size(); ++k)
    out[first + k] = caf::actor_cast<Handle>(handles[k]);
}

} // namespace crescent
