// `crescent bench kv-codec` (issue 23 item 3): the quality gate and the speed of the KV block
// codecs (storage/codec/kv_codec.hpp), every codec against full-precision KV in the same run.
//
// Quality: the reference engine (gpu/reference_model.hpp; a model with 128-dimensional heads,
// weights from the seed) prefills each prompt of a fixed, seeded set but its last token; each
// codec then encodes and decodes every KV page of that prefix (the last one as the sequence's
// last block), as a pool would store and hand them over, and the engine decodes from the
// decoded pages. The prompt's last token is the first decode step, so that every measured token
// reads compressed KV; the decoded tokens' own KV stays full precision (decode-side resident
// KV). Reported against the same prompts on the untouched pages:
//  - greedy token agreement: the share of the first decode_tokens tokens, decoded greedily from
//    the codec's pages on their own, equal to the full-precision ones at the same position;
//  - top-1 agreement and mean KL(full || codec) of the next-token distributions, teacher-forced
//    (the codec's run is fed the full-precision tokens, so every step compares like with like);
//  - the relative error of the attention outputs, ||a_codec - a_full|| / ||a_full|| over every
//    layer of a teacher-forced step, averaged over the steps.
// The "none" codec is the control: it must agree fully with KL 0.
//
// Size: encoded bytes (headers, scales, outliers, float32 rows all counted) against fp16 KV of
// the same tokens, over the prompt set's pages and for one full mid-sequence block.
// Speed: encode and decode of the prompt set's full blocks on one thread, in GB/s of
// fp16-equivalent bytes (elements x 2), against memcpy of that many bytes in the same run;
// medians of rounds.
//
// KVQuant's calibration comes from a calibration run of the same engine over other prompts.
#pragma once

#include <cstdint>

namespace crescent::bench {

struct bench_kv_codec_options {
  uint32_t prompts = 8;
  uint32_t prompt_tokens_min = 256; // prompt lengths spread over [min, max]
  uint32_t prompt_tokens_max = 640;
  uint32_t decode_tokens = 64;
  uint32_t calibration_prompts = 4; // of prompt_tokens_max tokens each
  // The model: 128-dimensional heads as the Llama family's, so that the formats' overheads
  // (scales per vector, outliers per vector) weigh what they would there.
  uint32_t layers = 4;
  uint32_t d_model = 512;
  uint32_t heads = 4;
  uint32_t kv_heads = 2;
  uint32_t ffn = 1376;
  uint32_t vocab = 2048;
  uint32_t block_tokens = 128;
  uint32_t group_tokens = 64; // KIVI's group
  uint32_t sink_tokens = 1;   // KVQuant's full-precision attention sinks
  uint64_t seed = 1;          // weights and prompts
  double speed_seconds = 0.3; // per codec and direction
};

/// Runs the benchmark and prints its table; 0 on success, 1 if a codec failed to encode or
/// decode a page (a bug), 2 for options outside the limits.
int bench_kv_codec(const bench_kv_codec_options& options);

} // namespace crescent::bench
