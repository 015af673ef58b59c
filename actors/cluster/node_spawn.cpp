#include "actors/cluster/node_spawn.hpp"

#include "actors/block_owner/block_owner.hpp"
#include "actors/coupled_worker/coupled_worker.hpp"
#include "actors/decode_worker/decode_worker.hpp"
#include "actors/prefill_worker/prefill_worker.hpp"
#include "gpu/cuda/device_engine.hpp"
#include "gpu/cuda/mapped_memory.hpp"
#include "gpu/modeled_engine.hpp"
#include "messages/errors.hpp"
#include "storage/dram_arena.hpp"
#include "storage/dram_pool.hpp"
#include "storage/ssd_tier.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <functional>
#include <mutex>
#include <vector>

namespace crescent {

std::vector<caf::actor> actors_on_node(const directory& dir, uint32_t node) {
  std::vector<caf::actor> out;
  auto add = [&](const auto& handle) {
    if (handle)
      out.push_back(caf::actor_cast<caf::actor>(handle));
  };
  if (node < dir.block_owners.size())
    add(dir.block_owners[node]);
  for (size_t i = 0; i < dir.prefill.size(); ++i)
    if (dir.prefill_node.at(i) == node)
      add(dir.prefill[i]);
  for (size_t i = 0; i < dir.decode.size(); ++i)
    if (dir.decode_node.at(i) == node)
      add(dir.decode[i]);
  for (size_t i = 0; i < dir.coupled.size(); ++i)
    if (dir.coupled_node.at(i) == node)
      add(dir.coupled[i]);
  return out;
}

namespace {

// A compressed pool's arena unit, and how many more blocks than uncompressed pages its metadata
// admits (KIVI 2-bit's full block is 6.4x smaller than fp16, 12.8x than float32 pages).
constexpr uint64_t compressed_unit_bytes = 8;
constexpr uint64_t compressed_blocks_factor_max = 16;
constexpr uint64_t compressed_blocks_max = uint64_t{1} << 28; // the arena's ranges fit a u32

} // namespace

caf::expected<block_owner_actor>
spawn_node_owner(caf::actor_system& sys, const cluster_config& cfg, uint32_t node,
                 const std::shared_ptr<transport::transfer_engine>& transfer,
                 const std::string& ssd_dir, store_master_actor master,
                 std::optional<transport::peer_info> peer,
                 std::shared_ptr<transport::modeled_links> links) {
  assert(node < cfg.nodes.size());
  // Blocks of the model's true page size; the arena holds them in the engine's memory layout
  // (the modeled engine's stand-ins are small, 64 bytes a layer: the arena's unit is the
  // largest power of two that divides theirs, so that a block wastes nothing).
  const uint64_t blocks = std::max<uint64_t>(1, pool_bytes_of(cfg, node) / cfg.model.page_bytes());
  const uint64_t memory_page = memory_page_bytes(cfg);
  uint64_t unit =
      std::min<uint64_t>(storage::dram_arena::unit_bytes, memory_page & (~memory_page + 1));
  // Compressed blocks come in any size: small units, and room in the metadata for as many
  // blocks as the same bytes hold compressed (the codec's full block; partial ones are fewer).
  auto codec = block_codec_of(cfg);
  if (!codec)
    return std::move(codec.error());
  uint64_t blocks_max = blocks;
  if (*codec) {
    unit = std::min<uint64_t>(unit, compressed_unit_bytes);
    const uint64_t full = std::max<uint64_t>(1, (*codec)->full_block_bytes());
    blocks_max = std::min<uint64_t>(blocks * compressed_blocks_factor_max,
                                    blocks * memory_page / full + blocks);
  }
  auto arena = storage::dram_arena::create(
      transfer, node, blocks * memory_page,
      static_cast<uint32_t>(std::min<uint64_t>(blocks_max, compressed_blocks_max)), unit,
      memory_touch(cfg));
  if (!arena)
    return std::move(arena.error());
  std::shared_ptr<storage::ssd_tier> ssd;
  std::function<uint64_t(uint64_t, bool)> ssd_modeled_ns;
  if (const uint64_t ssd_bytes = ssd_bytes_of(cfg, node); ssd_bytes > 0) {
    if (ssd_dir.empty())
      return make_error(errc::bad_config, "node " + std::to_string(node) +
                                              " has an SSD tier but no directory for it");
    storage::ssd_options sopt;
    sopt.directory = ssd_dir;
    sopt.capacity_bytes = ssd_bytes;
    sopt.blocks_max = static_cast<uint32_t>(std::min<uint64_t>(
        (ssd_bytes / cfg.model.page_bytes() + 1) * (*codec ? compressed_blocks_factor_max : 1),
        UINT32_MAX));
    if (cfg.engine.kind == gpu::engine_kind::modeled) {
      // Stand-ins (simulated time): as many blocks as the true bytes hold, in the arena's units;
      // the modeled drive gives the time, so nothing needs to reach the disk.
      sopt.capacity_bytes = ssd_bytes / cfg.model.page_bytes() * memory_page;
      sopt.unit_bytes = unit;
      sopt.sync_writes = false;
    } else
      sopt.sync_writes = cfg.store.sync_commits;
    auto tier = storage::ssd_tier::open(sopt);
    if (!tier)
      return std::move(tier.error());
    ssd = std::move(*tier);
    if (links)
      ssd_modeled_ns = [links, node](uint64_t bytes, bool write) {
        return links->reserve_ssd(node, bytes, write);
      };
  }
  block_owner_options bopt;
  bopt.node = node;
  bopt.policy = cfg.pool.eviction;
  bopt.high_watermark = cfg.pool.high_watermark;
  bopt.evict_fraction = cfg.pool.evict_fraction;
  bopt.promotion_reserve = cfg.pool.promotion_reserve;
  bopt.heartbeat_interval = std::chrono::milliseconds(cfg.heartbeat_interval_ms);
  bopt.own_thread = own_threads(cfg);
  return spawn_block_owner(sys, bopt,
                           {std::move(*arena), std::move(ssd), std::move(master), std::move(peer),
                            std::move(ssd_modeled_ns)});
}

caf::expected<std::unique_ptr<gpu::engine>>
make_engine(const cluster_config& cfg, std::shared_ptr<gpu::shared_cores> cores, int device) {
  if (cfg.engine.kind == gpu::engine_kind::modeled)
    return gpu::make_modeled_engine(cfg.model, cfg.engine.profile, std::move(cores));
  if (cfg.engine.kind == gpu::engine_kind::cuda)
    return gpu::make_cuda_engine(cfg.model, cfg.engine, device);
  return gpu::make_reference_engine(cfg.model, cfg.engine);
}

int device_of(const cluster_config& cfg, uint32_t node, worker_role role, uint32_t instance) {
  assert(node < cfg.nodes.size());
  const auto& devices = cfg.nodes[node].devices;
  if (devices.empty())
    return cfg.engine.device;
  // Instances are numbered node after node, per role (cluster.cpp): the first of this node's
  // is the count of the nodes before it.
  auto count = [&](const node_config& n) {
    return role == worker_role::prefill  ? n.prefill_instances
           : role == worker_role::decode ? n.decode_instances
                                         : n.coupled_instances;
  };
  uint32_t first = 0;
  for (uint32_t i = 0; i < node; ++i)
    first += count(cfg.nodes[i]);
  const auto& n = cfg.nodes[node];
  assert(instance >= first && instance - first < count(n));
  uint32_t slot = instance - first;
  if (role != worker_role::prefill)
    slot += n.prefill_instances;
  if (role == worker_role::coupled)
    slot += n.decode_instances;
  return static_cast<int>(devices[slot % devices.size()]);
}

caf::expected<std::shared_ptr<const gpu::block_codec>> block_codec_of(const cluster_config& cfg) {
  if (cfg.codec.kind == storage::codec::codec_kind::none)
    return std::shared_ptr<const gpu::block_codec>{};
  // One per process and distinct (model, codec): a cluster's workers and owners share it.
  struct entry {
    uint64_t fingerprint;
    gpu::block_codec_options options;
    bool modeled;
    std::shared_ptr<const gpu::block_codec> codec;
  };
  static std::mutex mutex;
  static std::vector<entry> built;
  constexpr size_t built_max = 16; // distinct cluster files in one process (tests)
  const bool modeled = cfg.engine.kind == gpu::engine_kind::modeled;
  const uint64_t fingerprint = cfg.model.fingerprint();
  std::lock_guard guard{mutex};
  for (const auto& e : built) {
    const auto& o = e.options;
    const auto& x = cfg.codec;
    if (e.fingerprint == fingerprint && e.modeled == modeled && o.kind == x.kind &&
        o.group_tokens == x.group_tokens && o.sink_tokens == x.sink_tokens &&
        o.calibration_prompts == x.calibration_prompts &&
        o.calibration_prompt_tokens == x.calibration_prompt_tokens &&
        o.calibration_seed == x.calibration_seed)
      return e.codec;
  }
  auto codec = modeled ? gpu::make_modeled_codec(cfg.model, cfg.codec)
                       : gpu::make_reference_codec(cfg.model, cfg.codec);
  if (!codec)
    return std::move(codec.error());
  // Blocks are encoded into, and read into, the front of their page (pool_io.cpp): the largest
  // (the first, with its sinks, or a last one with its residual) must fit.
  const uint32_t bt = cfg.model.block_tokens;
  size_t largest = 0;
  for (uint32_t index : {0u, 1u})
    for (uint32_t tokens : {bt, std::max(1u, bt - 1)})
      for (bool last : {false, true})
        largest = std::max(largest, (*codec)->block_bytes(index, tokens, last));
  // The reference engine's hand-off blocks must fit their ranges, the smallest (one layer)
  // too: its decoder has no way to tell floats that came as they are from a block.
  if (cfg.codec.handoff && cfg.engine.kind != gpu::engine_kind::modeled)
    for (uint32_t index : {0u, 1u})
      for (uint32_t tokens : {1u, bt})
        for (bool last : {false, true})
          if ((*codec)->slice_bytes(0, 1, index, tokens, last) == 0)
            return make_error(errc::bad_config,
                              fmt::format("kv_codec {}: a one-layer block of the hand-off does not "
                                          "fit its range of the page; set codec.handoff: false",
                                          storage::codec::to_string(cfg.codec.kind)));
  if (largest > memory_page_bytes(cfg))
    return make_error(errc::bad_config,
                      fmt::format("kv_codec {}: a block takes up to {} bytes, more than the {} "
                                  "of its page",
                                  storage::codec::to_string(cfg.codec.kind), largest,
                                  memory_page_bytes(cfg)));
  if (built.size() == built_max)
    built.erase(built.begin());
  built.push_back({fingerprint, cfg.codec, modeled, *codec});
  return *codec;
}

caf::expected<std::shared_ptr<const gpu::block_codec>> handoff_codec_of(const cluster_config& cfg) {
  if (!cfg.codec.handoff)
    return std::shared_ptr<const gpu::block_codec>{};
  return block_codec_of(cfg);
}

uint64_t memory_page_bytes(const cluster_config& cfg) {
  return cfg.engine.kind == gpu::engine_kind::modeled ? gpu::standin_page_bytes(cfg.model)
                                                      : cfg.model.page_bytes();
}

transport::touch memory_touch(const cluster_config& cfg) {
  return cfg.simulated_time ? transport::touch::on_use : transport::touch::up_front;
}

namespace {

// What every worker computes with: an engine, and `pages` KV pages registered with the
// transfer engine as memory of `node`.
struct worker_kit {
  std::shared_ptr<gpu::engine> engine;
  std::shared_ptr<storage::dram_pool> pages;
};

caf::expected<worker_kit> make_kit(const cluster_config& cfg, uint32_t node, uint32_t pages,
                                   const std::shared_ptr<transport::transfer_engine>& transfer,
                                   std::shared_ptr<gpu::shared_cores> cores, int device) {
  auto engine = make_engine(cfg, std::move(cores), device);
  if (!engine)
    return std::move(engine.error());
  auto pool = storage::dram_pool::create(transfer, node, (*engine)->page_memory_bytes(), pages,
                                         memory_touch(cfg));
  if (!pool)
    return std::move(pool.error());
  if (cfg.engine.kind != gpu::engine_kind::cuda)
    return worker_kit{std::move(*engine), std::move(*pool)};
  // The cuda engine computes on the pages where they are: host memory mapped into the device,
  // for as long as the engine lives (docs/gpu.md, "In a cluster").
  auto mapping =
      gpu::map_for_device((*pool)->memory(), cfg.engine.device, (*pool)->memory_keepalive());
  if (!mapping)
    return std::move(mapping.error());
  std::shared_ptr<gpu::engine> mapped{engine->release(),
                                      [keep = std::move(*mapping)](gpu::engine* e) { delete e; }};
  return worker_kit{std::move(mapped), std::move(*pool)};
}

} // namespace

caf::expected<decode_worker_actor>
spawn_decode_instance(caf::actor_system& sys, const cluster_config& cfg, uint32_t instance,
                      uint32_t node, const std::shared_ptr<transport::transfer_engine>& transfer,
                      directory_ref dir, std::shared_ptr<gpu::shared_cores> cores) {
  const auto pages = static_cast<uint32_t>(decode_kv_bytes_of(cfg) / cfg.model.page_bytes());
  auto kit = make_kit(cfg, node, pages, transfer, std::move(cores),
                      device_of(cfg, node, worker_role::decode, instance));
  if (!kit)
    return std::move(kit.error());
  auto codec = handoff_codec_of(cfg);
  if (!codec)
    return std::move(codec.error());
  decode_worker_options opt{instance,
                            node,
                            cfg.decode.batch_max,
                            cfg.decode.request_tokens_max,
                            cfg.simulated_time,
                            own_threads(cfg)};
  return spawn_decode_worker(
      sys, opt, {kit->engine, kit->pages, transfer, std::move(dir), std::move(*codec)});
}

caf::expected<prefill_worker_actor>
spawn_prefill_instance(caf::actor_system& sys, const cluster_config& cfg, uint32_t instance,
                       uint32_t node, const std::shared_ptr<transport::transfer_engine>& transfer,
                       directory_ref dir, std::shared_ptr<gpu::shared_cores> cores) {
  // Pages for two of the longest prompts: a job computes while the one before it stores.
  const uint32_t block = cfg.model.block_tokens;
  auto kit = make_kit(cfg, node, 2 * ((cfg.model.context_tokens_max + block - 1) / block), transfer,
                      std::move(cores), device_of(cfg, node, worker_role::prefill, instance));
  if (!kit)
    return std::move(kit.error());
  prefill_worker_options opt{instance,
                             node,
                             cfg.prefill.chunk_tokens,
                             cfg.prefill.queue_jobs_max,
                             cfg.simulated_time,
                             cfg.pool.replicas,
                             cfg.pool.placement,
                             cfg.pool.copy_pulled,
                             cfg.prefill.stream_min_tokens,
                             cfg.prefill.stream_layers,
                             cfg.prefill.overlap_store,
                             cfg.prefill.group_instances,
                             cfg.prefill.load_batch_bytes_max,
                             own_threads(cfg)};
  std::shared_ptr<storage::dram_pool> streams;
  if (cfg.prefill.group_instances > 1) {
    // An inbox and an outbox slot per chunk of the longest prompt (stage.cpp).
    const uint32_t chunks =
        (cfg.model.context_tokens_max + cfg.prefill.chunk_tokens - 1) / cfg.prefill.chunk_tokens;
    auto pool = storage::dram_pool::create(transfer, node,
                                           kit->engine->stream_bytes(cfg.prefill.chunk_tokens),
                                           2 * chunks, memory_touch(cfg));
    if (!pool)
      return std::move(pool.error());
    streams = std::move(*pool);
  }
  auto codec = block_codec_of(cfg);
  if (!codec)
    return std::move(codec.error());
  std::shared_ptr<storage::dram_pool> staging;
  if (*codec && cfg.codec.handoff) {
    // Where ranges of layers are encoded before they go to decode (handoff.cpp).
    const uint32_t pages = (cfg.model.context_tokens_max + block - 1) / block;
    auto pool = storage::dram_pool::create(transfer, node, kit->engine->page_memory_bytes(),
                                           2 * pages, memory_touch(cfg));
    if (!pool)
      return std::move(pool.error());
    staging = std::move(*pool);
  }
  return spawn_prefill_worker(sys, opt,
                              {kit->engine, kit->pages, transfer, std::move(dir),
                               std::move(streams), std::move(*codec), std::move(staging)});
}

caf::expected<coupled_worker_actor>
spawn_coupled_instance(caf::actor_system& sys, const cluster_config& cfg, uint32_t instance,
                       uint32_t node, const std::shared_ptr<transport::transfer_engine>& transfer,
                       directory_ref dir, std::shared_ptr<gpu::shared_cores> cores) {
  const auto pages = static_cast<uint32_t>(coupled_kv_bytes_of(cfg) / cfg.model.page_bytes());
  auto kit = make_kit(cfg, node, pages, transfer, std::move(cores),
                      device_of(cfg, node, worker_role::coupled, instance));
  if (!kit)
    return std::move(kit.error());
  coupled_worker_options opt;
  opt.instance = instance;
  opt.node = node;
  opt.batch_max = cfg.coupled.batch_max;
  opt.queue_jobs_max = cfg.coupled.queue_jobs_max;
  opt.chunked_prefill = cfg.coupled.chunked_prefill;
  opt.token_budget = coupled_token_budget(cfg);
  opt.prefix_caching = cfg.coupled.prefix_caching;
  opt.simulated_time = cfg.simulated_time;
  opt.own_thread = own_threads(cfg);
  return spawn_coupled_worker(sys, opt, {kit->engine, kit->pages, std::move(dir)});
}

} // namespace crescent
