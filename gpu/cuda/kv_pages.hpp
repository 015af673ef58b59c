// KV page movement on a GPU: gathering a sequence's pages (scattered in device memory) into one
// contiguous buffer, and scattering a buffer back into pages. This is how the CUDA engine packs
// KV for the transfer engine and unpacks what arrives. Built only with CUDA; each call returns
// errc::unavailable without a device.
#pragma once

#include <caf/error.hpp>

#include <cstddef>
#include <cstdint>

namespace crescent::gpu {

/// Copies `count` pages of `page_bytes` each, whose device addresses are in the device array
/// `pages`, into the device buffer `packed` in order. Synchronous. page_bytes must be a
/// multiple of 16.
caf::error gather_pages(const std::byte* const* pages, uint32_t count, size_t page_bytes,
                        std::byte* packed);

/// The inverse of gather_pages.
caf::error scatter_pages(const std::byte* packed, uint32_t count, size_t page_bytes,
                         std::byte* const* pages);

} // namespace crescent::gpu
