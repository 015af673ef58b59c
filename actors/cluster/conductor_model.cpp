#include "actors/cluster/conductor_model.hpp"

#include "actors/cluster/node_spawn.hpp"

#include "actors/cluster/profile_yaml.hpp"
#include "actors/prefill_worker/prefill_worker.hpp"
#include "gpu/engine.hpp"
#include "messages/errors.hpp"

#include <cmath>

namespace crescent {

namespace {

// The reference engine's modeled timing, as reference_engine.cpp charges it.
time_model_source reference_source(const gpu::model_config& model, double flops_per_s) {
  time_model_source src;
  src.name = "reference engine at " + std::to_string(flops_per_s) + " flop/s";
  src.prefill_call_ns = [model, flops_per_s](uint64_t cached, uint64_t tokens) {
    return static_cast<uint64_t>(
        std::ceil(gpu::model_flops(model, cached, tokens) / flops_per_s * 1e9));
  };
  // A decode step sums one token's flops per sequence, which is linear in its context: the
  // batch's mean context gives the sum.
  src.decode_step_ns = [model, flops_per_s](uint32_t batch, uint64_t context) {
    const uint64_t mean = context / batch;
    return static_cast<uint64_t>(
        std::ceil(batch * gpu::model_flops(model, mean, 1) / flops_per_s * 1e9));
  };
  return src; // in-process copies: the default bandwidths
}

caf::expected<time_model_source> source_for(const cluster_config& cfg) {
  const auto& e = cfg.engine;
  if (!cfg.conductor.profile.empty()) {
    auto p = load_profile(cfg.conductor.profile);
    if (!p)
      return std::move(p.error());
    if (auto err = gpu::check_model(**p, cfg.model))
      return make_error(errc::bad_config, "conductor.profile: " + describe(err));
    return source_of(*p, cfg.model);
  }
  if (e.kind == gpu::engine_kind::modeled)
    return source_of(e.profile, cfg.model);
  // The cuda engine: flops at the modeled rate (set engine.modeled_flops_per_s near the
  // device's, or name a conductor.profile), corrected online; this CPU's profile says nothing
  // of a GPU.
  if (e.timing == gpu::timing_mode::modeled || e.kind == gpu::engine_kind::cuda)
    return reference_source(cfg.model, e.modeled_flops_per_s);
  // Real time on the reference engine: this machine's measured profile where the model is the
  // one it measured; else flops at the modeled rate. Either way corrected online.
  if (auto p = load_profile(default_reference_profile); p && !gpu::check_model(**p, cfg.model))
    return source_of(*p, cfg.model);
  return reference_source(cfg.model, e.modeled_flops_per_s);
}

} // namespace

caf::expected<std::shared_ptr<const time_model>> conductor_time_model(const cluster_config& cfg) {
  auto src = source_for(cfg);
  if (!src)
    return std::move(src.error());
  auto m = time_model::fit(std::move(*src), cfg.model, cfg.prefill.chunk_tokens);
  if (!m)
    return std::move(m.error());
  m->set_streaming(
      cfg.prefill.stream_min_tokens, cfg.prefill.stream_layers, cfg.model.layers,
      prefill_prefix_load_batches,
      prefill_load_blocks_max(cfg.model.page_bytes(), cfg.prefill.load_batch_bytes_max));
  m->set_pipeline(cfg.prefill.group_instances);
  auto codec = block_codec_of(cfg);
  if (!codec)
    return std::move(codec.error());
  if (*codec) {
    m->set_pool_block_bytes((*codec)->full_block_model_bytes());
    if (cfg.codec.handoff)
      m->set_handoff_page_bytes((*codec)->full_block_model_bytes());
  }
  return std::make_shared<const time_model>(std::move(*m));
}

} // namespace crescent
