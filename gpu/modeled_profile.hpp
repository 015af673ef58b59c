// A profile of the modeled engine: the timing model of one model on one machine (one prefill or
// decode instance), with no arithmetic. Profiles are YAML files (data/profiles/, read by
// actors/cluster/profile_yaml.cpp), each value with its source in a comment.
//
// Prefill of n new tokens after p cached ones, over the paper's Equation 1, flops(n) =
// l (a n^2 d + b n d^2), made incremental: the attention term of the new tokens still covers
// the cached prefix, so it is a d ((p + n)^2 - p^2), while the linear term covers the new
// tokens only, b n d^2. The sum over chunks equals one call over the whole prompt exactly.
//   prefill_ns = l (a d ((p + n)^2 - p^2) + b n d^2) / (gpus * gpu_flops_per_s * prefill_mfu)
//                + prefill_call_overhead
// A decode step of a batch whose sequences hold c_i tokens reads every weight and every
// sequence's resident KV from HBM once, and computes one token per sequence:
//   decode_ns = (weight_bytes + sum_i kv_bytes(c_i + 1)) / (gpus * hbm_bytes_per_s *
//               hbm_efficiency) + sum_i l (a d (2 c_i + 1) + b d^2) / (gpus * gpu_flops_per_s *
//               decode_mfu) + decode_step_overhead
#pragma once

#include "gpu/model_config.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crescent::gpu {

struct modeled_profile {
  std::string name; // "llama3-70b-8xa800"
  std::string description;
  // The model it describes; the cluster's model section must agree (check_model).
  uint32_t layers = 0;
  uint32_t d_model = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t ffn = 0;
  uint32_t vocab = 0;
  uint32_t kv_element_bytes = 2;
  double parameters = 0;           // weights, all read once per decode step
  double weight_element_bytes = 2; // bf16
  // Equation 1's coefficients (paper Table 1: 4 and 22).
  double cost_a = 4;
  double cost_b = 22;
  // The machine of one instance.
  uint32_t gpus = 1;
  double gpu_flops_per_s = 0; // dense bf16, per GPU
  double gpu_hbm_bytes = 0;   // per GPU
  double gpu_hbm_bytes_per_s = 0;
  double h2d_bytes_per_s = 0; // host memory to GPU, per node
  double nic_bytes_per_s = 0; // per node, each direction
  double nic_latency_s = 0;   // added to each transfer between nodes
  // The node's SSD, for a pool with an SSD tier (nodes[].ssd_mib or ssd_tokens); all three 0:
  // the machine has none modeled, and such a cluster is refused. Reads and writes go side by
  // side, each at its own bandwidth (transport/modeled_links.hpp).
  double ssd_read_bytes_per_s = 0;
  double ssd_write_bytes_per_s = 0;
  double ssd_latency_s = 0; // added to each read or write
  // 0: every instance computes on devices of its own. N: all the cluster's instances share N
  // cores (an engine on the host's CPU in one process; gpu/shared_cores.hpp).
  uint32_t shared_cores = 0;
  // How much of the peak the kernels reach.
  double prefill_mfu = 0;
  double decode_mfu = 0;
  double hbm_efficiency = 0;
  double prefill_call_overhead_s = 0; // per prefill call (one chunk)
  double decode_step_overhead_s = 0;  // per decode step
  // Fitted by `crescent profile` from measurements of an engine on a machine (the `fit:`
  // section). When set, these decide compute times instead of cost, the machine's GPU figures
  // and efficiency (which a fitted profile may leave out); the links still come from machine.
  //   prefill_ns = base + per_token n + per_key (n p + n (n + 1) / 2) + per_cached_token p
  //   (keys attended, and the cached prefix read once per call)
  //   decode_ns  = base + per_sequence B + per_context_token sum_i (c_i + 1)
  bool fitted = false;
  double prefill_base_ns = 0;
  double prefill_per_token_ns = 0;
  double prefill_per_key_ns = 0;
  double prefill_per_cached_token_ns = 0;
  double decode_base_ns = 0;
  double decode_per_sequence_ns = 0;
  double decode_per_context_token_ns = 0;
  double prefill_fit_error = 0; // rms relative error over the measurements, as fitted
  double decode_fit_error = 0;
  // Warm-up after idle (the `warmup:` section, measured by `crescent profile`): the extra time of
  // a call whose instance computed nothing for a while before it. On a host's CPU the caches and
  // the core go cold meanwhile: on the 2-core build machine a decode step of a 4-layer model took
  // 10 times its warm time after 100 ms idle, where a prefill chunk took a few percent more.
  // Points (warmup_idle_ms[i], extra[i]) after an implied (0, 0), interpolated linearly, flat
  // after the last (warmup_extra_ns). All three lists empty: none. Only with shared_cores (an
  // engine on the host's cores, whose clock the engine reads the idle time from).
  std::vector<double> warmup_idle_ms;
  std::vector<double> prefill_warmup_ns;
  std::vector<double> decode_warmup_ns;

  double weight_bytes() const { return parameters * weight_element_bytes; }
  /// HBM left for KV on one instance once the weights are in.
  double kv_capacity_bytes() const { return gpus * gpu_hbm_bytes - weight_bytes(); }
  /// Whether the profile gives an SSD (its bandwidths are set).
  bool has_ssd() const { return ssd_read_bytes_per_s > 0 && ssd_write_bytes_per_s > 0; }
};

/// Points of a warm-up curve, at most.
inline constexpr size_t warmup_points_max = 8;

/// The extra nanoseconds of a call after `idle_ns` without one, on the curve of `extra_ns` at
/// `idle_ms` (modeled_profile's warm-up; validated: equal sizes, idle_ms increasing).
uint64_t warmup_extra_ns(std::span<const double> idle_ms, std::span<const double> extra_ns,
                         int64_t idle_ns);

/// Checks every field's range; the error names the field ("profile.gpus: ...").
caf::error validate(const modeled_profile& p);

/// Checks that the cluster's model is the one the profile describes; the error names the field
/// that differs. block_tokens and context_tokens_max are the cluster's to choose.
caf::error check_model(const modeled_profile& p, const model_config& model);

/// The model section a profile implies, with the given block size and context limit.
model_config model_of(const modeled_profile& p, uint32_t block_tokens, uint32_t context_tokens_max);

/// Modeled nanoseconds of a prefill call: `tokens` new tokens after `cached_tokens`.
uint64_t modeled_prefill_ns(const modeled_profile& p, uint64_t cached_tokens, uint64_t tokens);

/// The share of such a call that `layers_run` of its layers take; the call's overhead (the
/// fitted base) counts on the range that starts at layer 0 (`first_range`).
uint64_t modeled_prefill_layers_ns(const modeled_profile& p, uint64_t cached_tokens,
                                   uint64_t tokens, uint32_t layers_run, bool first_range);

/// Modeled nanoseconds of one decode step over sequences holding `context_tokens[i]` tokens
/// each before it; `kv_bytes_per_token` from the model (model_config::kv_bytes_per_token).
uint64_t modeled_decode_ns(const modeled_profile& p, std::span<const uint32_t> context_tokens,
                           uint64_t kv_bytes_per_token);

/// The same from the batch's size and the sum over its sequences of (c_i + 1): the time is
/// linear in both, so predictions need no list of sequences.
uint64_t modeled_decode_ns(const modeled_profile& p, uint64_t batch, double positions,
                           uint64_t kv_bytes_per_token);

} // namespace crescent::gpu
