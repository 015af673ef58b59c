// Spawning the actors of one node from the cluster file: shared by the embedded cluster and by
// `crescent node`, the process that hosts a node of a cluster spanning processes.
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/cluster/cluster_config.hpp"
#include "actors/cluster/directory.hpp"
#include "actors/decode_worker/decode_worker_actor.hpp"
#include "actors/store_master/store_master_actor.hpp"
#include "gpu/shared_cores.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace crescent {

/// Node `node`'s block owner and workers in `dir` (what its agent watches), in that order, the
/// handles it lacks left out.
std::vector<caf::actor> actors_on_node(const directory& dir, uint32_t node);

/// The engine the cluster file names (engine.kind): the reference engine, the modeled one
/// (whose profile may have the cluster's instances share `cores`), or the cuda engine on CUDA
/// device `device`.
caf::expected<std::unique_ptr<gpu::engine>>
make_engine(const cluster_config& cfg, std::shared_ptr<gpu::shared_cores> cores = nullptr,
            int device = 0);

/// The roles of a node's workers, in the order they take its devices (node_config::devices).
enum class worker_role { prefill, decode, coupled };

/// The CUDA device of the cluster-wide `instance` of `role`, on `node`: the node's devices in
/// turn over its prefill, then decode, then coupled instances; engine.device where the node
/// lists none.
int device_of(const cluster_config& cfg, uint32_t node, worker_role role, uint32_t instance);

/// Bytes of one KV page in the memory the cluster's engine computes on (its pool blocks and
/// worker pages): the model's page, or the modeled engine's stand-in of it.
uint64_t memory_page_bytes(const cluster_config& cfg);

/// The cluster's pool block codec (kv_codec), or null for kv_codec none (pages stored as they
/// are). Built once per process and cluster file, since KVQuant's takes a calibration run of
/// the reference engine; every process of a cluster fits the same (it is deterministic).
caf::expected<std::shared_ptr<const gpu::block_codec>> block_codec_of(const cluster_config& cfg);
/// The same when it compresses the prefill-to-decode hand-off too (codec.handoff), else null.
caf::expected<std::shared_ptr<const gpu::block_codec>> handoff_codec_of(const cluster_config& cfg);

/// When the cluster's pool and worker memory is faulted in: up front in real time (no page
/// fault inside a transfer), on use in simulated time (no copy is timed, and a paper cluster's
/// pools would take seconds to touch and hundreds of MiB that a short run never uses).
transport::touch memory_touch(const cluster_config& cfg);

/// Node `node`'s block owner: a DRAM arena of nodes[node].pool_bytes registered with `transfer`
/// and, where the node has an SSD tier (ssd_bytes_of), one in `ssd_dir` (which must then be
/// given), timed on `links`' modeled drive in simulated time. `peer` is how other processes reach
/// the arena (none inside one process); `master` may be empty until a join_atom brings it.
caf::expected<block_owner_actor>
spawn_node_owner(caf::actor_system& sys, const cluster_config& cfg, uint32_t node,
                 const std::shared_ptr<transport::transfer_engine>& transfer,
                 const std::string& ssd_dir, store_master_actor master,
                 std::optional<transport::peer_info> peer,
                 std::shared_ptr<transport::modeled_links> links = nullptr);

/// Decode instance `instance` (cluster-wide index) on `node`: a reference engine and
/// decode.kv_bytes of KV pages registered with `transfer`.
caf::expected<decode_worker_actor>
spawn_decode_instance(caf::actor_system& sys, const cluster_config& cfg, uint32_t instance,
                      uint32_t node, const std::shared_ptr<transport::transfer_engine>& transfer,
                      directory_ref dir, std::shared_ptr<gpu::shared_cores> cores = nullptr);

/// Prefill instance `instance` (cluster-wide index) on `node`: a reference engine and KV pages
/// for the longest prompt, registered with `transfer`.
caf::expected<prefill_worker_actor>
spawn_prefill_instance(caf::actor_system& sys, const cluster_config& cfg, uint32_t instance,
                       uint32_t node, const std::shared_ptr<transport::transfer_engine>& transfer,
                       directory_ref dir, std::shared_ptr<gpu::shared_cores> cores = nullptr);

/// Coupled instance `instance` (cluster-wide index) on `node`: an engine and the instance's KV
/// memory (coupled_kv_bytes_of), registered with `transfer` like every worker's pages.
caf::expected<coupled_worker_actor>
spawn_coupled_instance(caf::actor_system& sys, const cluster_config& cfg, uint32_t instance,
                       uint32_t node, const std::shared_ptr<transport::transfer_engine>& transfer,
                       directory_ref dir, std::shared_ptr<gpu::shared_cores> cores = nullptr);

} // namespace crescent
