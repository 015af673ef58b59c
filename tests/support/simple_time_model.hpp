// A time model with times easy to follow, for conductor and policy tests: 1 us per computed
// token, 1 ms per decoding sequence, a KV page of 8,192 bytes (the default model's 16-token
// blocks) moving at 1 GB/s within a node and 0.5 GB/s between nodes.
#pragma once

#include "actors/conductor/time_model.hpp"

#include <gtest/gtest.h>

namespace crescent::testing {

inline time_model simple_time_model() {
  time_model_source src;
  src.name = "simple";
  src.prefill_call_ns = [](uint64_t, uint64_t tokens) { return 1000 * tokens; };
  src.decode_step_ns = [](uint32_t batch, uint64_t) { return 1'000'000ull * batch; };
  src.h2d_bytes_per_s = 1e9;
  src.nic_bytes_per_s = 0.5e9;
  auto m = time_model::fit(src, gpu::model_config{}, 128);
  EXPECT_TRUE(m);
  return *m;
}

} // namespace crescent::testing
