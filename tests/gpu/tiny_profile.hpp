// A modeled profile for the gpu tests: small numbers that hand computations can follow.
#pragma once

#include "gpu/model_config.hpp"
#include "gpu/modeled_profile.hpp"

namespace crescent::gpu {

// Small numbers, so that the formulas of modeled_profile.hpp can be followed by hand.
inline modeled_profile tiny_profile() {
  modeled_profile p;
  p.name = "tiny";
  p.layers = 2;
  p.d_model = 4;
  p.heads = 2;
  p.kv_heads = 1;
  p.ffn = 8;
  p.vocab = 1000;
  p.kv_element_bytes = 2;
  p.parameters = 1000;
  p.weight_element_bytes = 2;
  p.cost_a = 4;
  p.cost_b = 22;
  p.gpus = 1;
  p.gpu_flops_per_s = 1e9; // 1 flop per ns
  p.gpu_hbm_bytes = 1e9;
  p.gpu_hbm_bytes_per_s = 1e9; // 1 byte per ns
  p.h2d_bytes_per_s = 1e9;
  p.nic_bytes_per_s = 1e9;
  p.nic_latency_s = 0;
  p.prefill_mfu = 1;
  p.decode_mfu = 1;
  p.hbm_efficiency = 1;
  return p;
}

/// tiny_profile's costs for a model of `m`'s shape.
inline modeled_profile tiny_profile_of(const model_config& m) {
  auto p = tiny_profile();
  p.layers = m.layers;
  p.d_model = m.d_model;
  p.heads = m.heads;
  p.kv_heads = m.kv_heads;
  p.ffn = m.ffn;
  p.vocab = m.vocab;
  p.kv_element_bytes = m.kv_element_bytes;
  return p;
}

} // namespace crescent::gpu
