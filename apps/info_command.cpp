#include "apps/info_command.hpp"

#include "gpu/cuda/cuda_devices.hpp"
#include "messages/errors.hpp"
#include "messages/xxh3.hpp"
#include "transport/rdma/rdma_devices.hpp"

#include <fmt/format.h>

namespace crescent::cli {

namespace {

void print_cuda() {
  fmt::print("  CUDA        {}\n", gpu::built_with_cuda() ? "built (sm_90)" : "not built");
  auto devices = gpu::cuda_devices();
  if (!devices) {
    fmt::print("              {}\n", describe(devices.error()));
    return;
  }
  for (const auto& d : *devices)
    fmt::print("              cuda:{} {} ({:.1f} GiB, sm_{}{}, PCI bus {})\n", d.index, d.name,
               static_cast<double>(d.memory_bytes) / (1ull << 30), d.compute_major, d.compute_minor,
               d.pci_bus);
}

void print_rdma() {
  fmt::print("  RDMA        {}\n",
             transport::built_with_rdma() ? "built (rdma-core)" : "not built");
  auto devices = transport::rdma_devices();
  if (!devices) {
    fmt::print("              {}\n", describe(devices.error()));
    return;
  }
  for (const auto& d : *devices)
    fmt::print("              {} ({} ports, NUMA node {}, PCI {})\n", d.name, d.ports, d.numa_node,
               d.pci_address.empty() ? "?" : d.pci_address);
}

} // namespace

int info_command() {
  fmt::print("crescent {}\n", CRESCENT_VERSION);
  fmt::print("  engines     reference (CPU), modeled (simulated time), cuda ({})\n",
             gpu::built_with_cuda() ? "the devices below" : "not in this build");
  print_cuda();
  print_rdma();
  fmt::print("  checksums   XXH3-64, {} build\n", xxh3_64_path());
  return 0;
}

} // namespace crescent::cli
