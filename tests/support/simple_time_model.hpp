// A time model with times easy to follow, for conductor and policy tests: 1 us per computed
// token, 1 ms per decoding sequence, a KV page of 8,192 bytes (the default model's 16-token
// blocks) moving at 1 GB/s within a node and 0.5 GB/s between nodes; with a drive, read back
// from an SSD tier at `ssd_read_bytes_per_s`.
#pragma once

#include "actors/conductor/time_model.hpp"

#include <gtest/gtest.h>

namespace crescent::testing {

inline time_model simple_time_model(double ssd_read_bytes_per_s = 0) {
  time_model_source src;
  src.name = "simple";
  src.prefill_call_ns = [](uint64_t, uint64_t tokens) { return 1000 * tokens; };
  src.decode_step_ns = [](uint32_t batch, uint64_t) { return 1'000'000ull * batch; };
  src.h2d_bytes_per_s = 1e9;
  src.nic_bytes_per_s = 0.5e9;
  src.ssd_read_bytes_per_s = ssd_read_bytes_per_s;
  auto m = time_model::fit(src, gpu::model_config{}, 128);
  EXPECT_TRUE(m);
  return *m;
}

} // namespace crescent::testing
