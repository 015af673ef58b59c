// device_ops on a CUDA device: cudart for memory and copies, model_kernels.cu for the kernels.
// Every call first makes the engine's device current on the calling thread (a worker may call
// from another thread than the one that made it). Without CUDA in the build, make_cuda_ops
// says so.
#include "gpu/cuda/device_ops.hpp"

#include "gpu/cuda/cuda_devices.hpp"
#include "messages/errors.hpp"

#ifdef CRESCENT_HAVE_CUDA
#include "gpu/cuda/model_kernels.cuh"

#include <cuda_runtime_api.h>
#endif

#include <string>
#include <utility>

namespace crescent::gpu {

#ifdef CRESCENT_HAVE_CUDA

namespace {

class cuda_ops final : public device_ops {
 public:
  cuda_ops(int index, std::string name) : index_(index), name_(std::move(name)) {}

  std::string describe() const override { return name_ + " (cuda:" + std::to_string(index_) + ")"; }

  caf::expected<void*> allocate(size_t bytes) override {
    void* p = nullptr;
    if (auto err = check(enter(), "cudaSetDevice"))
      return err;
    if (auto rc = cudaMalloc(&p, bytes); rc != cudaSuccess) {
      if (rc == cudaErrorMemoryAllocation)
        return make_error(errc::no_space, describe() + ": cudaMalloc of " + std::to_string(bytes) +
                                              " bytes: out of memory");
      return check(rc, "cudaMalloc");
    }
    return p;
  }

  void release(void* p) noexcept override {
    if (enter() == cudaSuccess)
      cudaFree(p);
  }

  caf::error to_device(void* dst, const void* src, size_t bytes) override {
    if (auto err = check(enter(), "cudaSetDevice"))
      return err;
    return check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }

  caf::error to_host(void* dst, const void* src, size_t bytes) override {
    if (auto err = check(enter(), "cudaSetDevice"))
      return err;
    return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }

  caf::error on_device(void* dst, const void* src, size_t bytes) override {
    if (auto err = check(enter(), "cudaSetDevice"))
      return err;
    // A copy within the device does not wait for itself: synchronize, so that it is synchronous
    // as the contract says (and a benchmark times the copy, not its launch).
    if (auto err = check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice),
                         "cudaMemcpy on the device"))
      return err;
    return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  void embed(const float* table, uint32_t d, const device_rows& rows, uint32_t n,
             float* x) override {
    note(launch([&] { return kernels::embed(table, d, rows, n, x); }), "embed");
  }

  void rms_norm(const float* x, uint32_t rows, uint32_t dim, const float* weight, float eps,
                float* out) override {
    note(launch([&] { return kernels::rms_norm(x, rows, dim, weight, eps, out); }), "rms_norm");
  }

  void matmul(const float* x, uint32_t rows, uint32_t in, const float* w, uint32_t cols,
              float* out) override {
    note(launch([&] { return kernels::matmul(x, rows, in, w, cols, out); }), "matmul");
  }

  void add(float* x, const float* y, size_t n) override {
    note(launch([&] { return kernels::add(x, y, n); }), "add");
  }

  void swiglu(const float* gu, uint32_t rows, uint32_t ffn, float* act) override {
    note(launch([&] { return kernels::swiglu(gu, rows, ffn, act); }), "swiglu");
  }

  void rope_store(float* qkv, const elements::attention_shape& s, const device_rows& rows,
                  uint32_t n, const float* cos, const float* sin, float q_scale) override {
    note(launch([&] { return kernels::rope_store(qkv, s, rows, n, cos, sin, q_scale); }),
         "rope_store");
  }

  void attention(const float* qkv, const elements::attention_shape& s, const device_rows& rows,
                 uint32_t lane_first, uint32_t lane_count, uint32_t keys_max, float* scores,
                 size_t scores_stride, float* totals, float* mixed) override {
    note(launch([&] {
           return kernels::attention(qkv, s, rows, lane_first, lane_count, keys_max, scores,
                                     scores_stride, totals, mixed);
         }),
         "attention");
  }

  void argmax(const float* logits, uint32_t rows, uint32_t vocab, uint32_t* out) override {
    note(launch([&] { return kernels::argmax(logits, rows, vocab, out); }), "argmax");
  }

  caf::error finish() override {
    note(launch([] { return cudaDeviceSynchronize(); }), "cudaDeviceSynchronize");
    return std::exchange(first_error_, caf::error{});
  }

 private:
  cudaError_t enter() const { return cudaSetDevice(index_); }

  template <class Launch>
  cudaError_t launch(Launch&& f) {
    if (auto rc = enter(); rc != cudaSuccess)
      return rc;
    return f();
  }

  caf::error check(cudaError_t rc, const char* what) const {
    if (rc == cudaSuccess)
      return caf::none;
    return make_error(errc::io_error, describe() + ": " + what + ": " + cudaGetErrorString(rc));
  }

  // Keeps the first failure of a queued kernel for finish().
  void note(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess && !first_error_)
      first_error_ = check(rc, what);
  }

  int index_;
  std::string name_;
  caf::error first_error_;
};

} // namespace

caf::expected<std::unique_ptr<device_ops>> make_cuda_ops(int index) {
  auto device = cuda_device_at(index);
  if (!device)
    return device.error();
  return std::unique_ptr<device_ops>{std::make_unique<cuda_ops>(index, device->name)};
}

#else

caf::expected<std::unique_ptr<device_ops>> make_cuda_ops(int) {
  return make_error(errc::unavailable, "this binary was built without CUDA (nvcc not found)");
}

#endif

} // namespace crescent::gpu
