// The conductor's time model: what it predicts a placement costs, from the engine's costs (a
// profile of the modeled engine, gpu/modeled_profile.hpp, or the reference engine's own timing).
//
// - Prefill compute of a prompt of P tokens reusing R: a least-squares fit (gpu/least_squares)
//   of the profile's own per-chunk times, summed over the chunks a prefill worker computes, on
//   the features [chunks, n, n^2, n R, chunks R] with n = P - R. The fit's error over its grid
//   is kept (printed where the conductor is brought up); online, every prefill report's actual
//   compute corrects it by a smoothed ratio (correct()).
// - Loading reused blocks: their bytes over the host-to-device bandwidth (local) or the NIC
//   (from another node), after reading those only on an SSD tier back over the drive's read
//   bandwidth; the hand-off to decode: the prompt's pages over the NIC.
// - Pulling blocks from another node: their bytes, behind what other jobs are reading from that
//   node now, over the bandwidth between the two nodes learned from completed pulls (smoothed;
//   the profile's NIC until the first), plus the NIC's latency.
// - A decode step: the profile's decode time of a batch (batch size, resident context tokens).
// Pure and deterministic: a policy is a function of a view that holds one of these.
#pragma once

#include "actors/common/node_set.hpp"
#include "gpu/model_config.hpp"
#include "gpu/modeled_profile.hpp"

#include <caf/expected.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace crescent {

/// What the time model predicts from: the engine's per-call costs and the links.
struct time_model_source {
  std::string name; // the profile or engine, for reports
  /// One prefill call: `tokens` after `cached` (what the engine would say).
  std::function<uint64_t(uint64_t cached, uint64_t tokens)> prefill_call_ns;
  /// One decode step of `batch` sequences holding `context_tokens` together.
  std::function<uint64_t(uint32_t batch, uint64_t context_tokens)> decode_step_ns;
  double h2d_bytes_per_s = 20e9;
  double nic_bytes_per_s = 20e9;
  double nic_latency_s = 0;
  // A node's SSD tier: 0 where the source gives no drive (a read from it then costs nothing
  // beyond the load that follows).
  double ssd_read_bytes_per_s = 0;
  double ssd_latency_s = 0;
};

/// The source for a modeled engine's profile.
time_model_source source_of(std::shared_ptr<const gpu::modeled_profile> profile,
                            const gpu::model_config& model);

class time_model {
 public:
  /// Fits the prefill predictor to `source`'s calls for `model` in chunks of `chunk_tokens`.
  static caf::expected<time_model> fit(time_model_source source, const gpu::model_config& model,
                                       uint32_t chunk_tokens);

  /// Predicted compute of a prefill: `prompt_tokens`, of which `reused_tokens` are loaded.
  uint64_t prefill_ns(uint32_t prompt_tokens, uint32_t reused_tokens) const;
  /// Loading `blocks` cached blocks: from this node's pool, or from another node's.
  uint64_t load_ns(uint32_t blocks, bool remote) const;
  /// Reading `blocks` blocks back from a node's SSD tier into its DRAM before they load: their
  /// bytes over the drive's read bandwidth, plus its latency (0 without a drive in the source).
  uint64_t ssd_read_ns(uint32_t blocks) const;
  /// Pulling `blocks` from node `from` to node `to` behind `backlog_bytes` already being read
  /// from `from`.
  uint64_t pull_ns(uint32_t blocks, uint32_t from, uint32_t to, uint64_t backlog_bytes) const;
  /// Folds in a completed pull of `bytes` from `from` to `to` in `ns` (a step of 1/8 towards
  /// it); nodes at or past nodes_max and empty or instant pulls are ignored.
  void learn_transfer(uint32_t from, uint32_t to, uint64_t bytes, uint64_t ns);
  /// Bytes per second from `from` to `to`: learned, or the profile's NIC.
  double bandwidth(uint32_t from, uint32_t to) const;
  static constexpr uint32_t nodes_max = node_set::capacity;
  /// Writing `blocks` new blocks into this node's pool.
  uint64_t store_ns(uint32_t blocks) const { return load_ns(blocks, false); }
  /// The prompt's KV to a decode instance on another node after its prefill's `compute_ns`:
  /// all of it when sent after prefill. Streamed (set_streaming), what cannot hide behind the
  /// compute and the load of the cached prefix (`load_blocks` blocks in `load_ns`, whose first
  /// batch's pages start it), and at least the last step's layers of the last chunk.
  uint64_t handoff_ns(uint32_t prompt_tokens, uint64_t compute_ns = 0, uint64_t load_ns = 0,
                      uint32_t load_blocks = 0) const {
    return handoff(prompt_tokens, compute_ns, load_ns, load_blocks).tail_ns;
  }
  struct handoff_estimate {
    uint64_t tail_ns = 0; // handoff_ns
    // The hand-off's last stretch in which its bytes come as fast as the NIC takes them, which
    // ends with it: all of the transfer when sent after prefill or when streaming is held back by
    // the link (a prompt found whole in the pool), else the last step. Without the latency.
    uint64_t burst_ns = 0;
  };
  handoff_estimate handoff(uint32_t prompt_tokens, uint64_t compute_ns = 0, uint64_t load_ns = 0,
                           uint32_t load_blocks = 0) const;
  /// Prompts of at least `min_tokens` stream `step_layers` of the model's `layers` a step, and
  /// read their prefix in up to `load_batches` batches of at most `load_batch_blocks` blocks
  /// (the prefill worker's stream_min_tokens, stream_layers, prefill_prefix_load_batches and
  /// prefill_load_blocks_max). Not called: none stream.
  void set_streaming(uint32_t min_tokens, uint32_t step_layers, uint32_t layers,
                     uint32_t load_batches, uint64_t load_batch_blocks = UINT64_MAX);
  /// Prefill instances work in groups of `stages` (CPP): a prompt's chunks go through the
  /// stages in a pipeline, so its compute is about 1/stages of the chunks' sum plus the last
  /// chunk's time through the other stages (prefill_ns). 1: none.
  void set_pipeline(uint32_t stages);
  /// One decode step of `batch` sequences holding `context_tokens` tokens together.
  uint64_t decode_step_ns(uint32_t batch, uint64_t context_tokens) const;

  /// Folds in a prefill's actual compute against its prediction (a smoothed ratio, bounded to
  /// [0.1, 10]): the profile was measured elsewhere, or the machine is busier than it was.
  void correct(uint64_t predicted_ns, uint64_t actual_ns);
  double correction() const { return correction_; }

  /// The fit's rms relative error over its grid of (prompt, reused) points.
  double fit_error() const { return fit_error_; }
  const std::string& name() const { return source_.name; }
  uint64_t page_bytes() const { return page_bytes_; }
  /// Bytes of a full block in the pool, which pool loads and pulls move: the page, or what the
  /// cluster's codec (kv_codec) stores it as.
  uint64_t pool_block_bytes() const { return pool_block_bytes_; }
  void set_pool_block_bytes(uint64_t bytes);
  /// Bytes of a page on the hand-off: the page, or its blocks when the codec compresses the
  /// hand-off too (codec.handoff).
  void set_handoff_page_bytes(uint64_t bytes);

 private:
  time_model() = default;
  static constexpr size_t feature_count = 5;
  // No allocation: a placement evaluates this once per prefill instance.
  static std::array<double, feature_count> features(uint32_t prompt, uint32_t reused,
                                                    uint32_t chunk);

  time_model_source source_;
  uint32_t chunk_tokens_ = 1;
  uint32_t block_tokens_ = 1;
  uint64_t page_bytes_ = 0;
  uint64_t pool_block_bytes_ = 0;
  uint64_t handoff_page_bytes_ = 0;
  std::vector<double> coefficients_;
  double fit_error_ = 0;
  double correction_ = 1.0;
  std::vector<double> pair_bytes_per_s_; // from * nodes_max + to; 0: not learned (empty: none)
  uint32_t stream_min_tokens_ = UINT32_MAX;
  double stream_step_share_ = 1; // of a chunk's KV, what one step sends
  uint32_t stream_load_batches_ = 1;
  uint64_t stream_load_batch_blocks_ = UINT64_MAX;
  uint32_t stages_ = 1; // of a prefill group
};

} // namespace crescent
