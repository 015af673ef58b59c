// Helpers of the GPU tests: a device allocation that frees itself (the engine's own), random bytes,
// and the skip reason of machines without a GPU.
#pragma once

#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/device_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

namespace crescent::transport::test {

/// Skips the test, with the engine's reason, where it has no cuda path.
#define CRESCENT_SKIP_WITHOUT_CUDA(engine)                                                         \
  if (auto why = (engine).cuda_status())                                                           \
  GTEST_SKIP() << describe(why)

/// Memory of cuda:0 (transport::device_memory); p is null where it could not be allocated.
struct device_buffer {
  transport::device_memory memory;
  std::byte* p = nullptr;
  size_t bytes = 0;
  explicit device_buffer(size_t n) : bytes(n) {
    if (auto m = transport::device_memory::allocate(n, 0)) {
      memory = std::move(*m);
      p = memory.data();
    }
  }

  void upload(size_t at, const std::vector<std::byte>& bytes_in) {
    ASSERT_EQ(cudaMemcpy(p + at, bytes_in.data(), bytes_in.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<std::byte> download(size_t at, size_t n) const {
    std::vector<std::byte> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), p + at, n, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

/// An engine serving `node` that reaches peers on this host only (cuda and shm paths).
inline std::shared_ptr<transfer_engine> same_host_engine(uint32_t node) {
  transfer_options o;
  o.local_nodes = {node};
  o.enable_tcp = false;
  o.enable_rdma = false;
  return *transfer_engine::create(o);
}

using crescent::testing::random_bytes;

} // namespace crescent::transport::test
