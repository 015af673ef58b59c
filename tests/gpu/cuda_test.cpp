// CUDA code: built wherever nvcc exists, run where a GPU exists, skipped with the reason
// elsewhere.
#include "gpu/cuda/cuda_devices.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#ifdef CRESCENT_HAVE_CUDA
#include "gpu/cuda/kv_pages.hpp"

#include <cuda_runtime_api.h>
#endif

#include <vector>

namespace crescent::gpu {
namespace {

TEST(cuda, device_discovery_answers_either_way) {
  auto devices = cuda_devices();
  if (!devices) {
    EXPECT_TRUE(is(devices.error(), errc::unavailable)) << describe(devices.error());
    GTEST_SKIP() << describe(devices.error());
  }
  for (const auto& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.memory_bytes, 0u);
  }
}

#ifdef CRESCENT_HAVE_CUDA

TEST(cuda, gather_and_scatter_pages_round_trip) {
  auto devices = cuda_devices();
  if (!devices)
    GTEST_SKIP() << describe(devices.error());
  constexpr uint32_t pages = 37;
  constexpr size_t page_bytes = 4096 + 16;
  std::vector<std::byte> host(pages * page_bytes);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = std::byte(i * 131 + i / 4099);
  // Pages scattered over one allocation in reverse order, as a page table would have them.
  std::byte* arena = nullptr;
  std::byte* packed = nullptr;
  std::byte** table = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&arena), host.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&packed), host.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&table), pages * sizeof(std::byte*)), cudaSuccess);
  std::vector<std::byte*> ptrs(pages);
  for (uint32_t i = 0; i < pages; ++i)
    ptrs[i] = arena + (pages - 1 - i) * page_bytes;
  ASSERT_EQ(cudaMemcpy(table, ptrs.data(), pages * sizeof(std::byte*), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(packed, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_FALSE(scatter_pages(packed, pages, page_bytes, table));
  ASSERT_EQ(cudaMemset(packed, 0, host.size()), cudaSuccess);
  ASSERT_FALSE(gather_pages(table, pages, page_bytes, packed));
  std::vector<std::byte> back(host.size());
  ASSERT_EQ(cudaMemcpy(back.data(), packed, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  std::vector<std::byte> last_page(page_bytes);
  ASSERT_EQ(cudaMemcpy(last_page.data(), arena, page_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(
      std::equal(last_page.begin(), last_page.end(), host.begin() + (pages - 1) * page_bytes))
      << "page i lives where the table says";
  cudaFree(arena);
  cudaFree(packed);
  cudaFree(table);
}

TEST(cuda, bad_shapes_are_refused_before_launch) {
  EXPECT_TRUE(is(gather_pages(nullptr, 1, 15, nullptr), errc::invalid_argument));
  EXPECT_TRUE(is(gather_pages(nullptr, 70000, 16, nullptr), errc::limit_exceeded));
  EXPECT_FALSE(gather_pages(nullptr, 0, 16, nullptr));
}

#endif

} // namespace
} // namespace crescent::gpu
