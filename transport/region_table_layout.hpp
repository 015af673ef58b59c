// The region table's layout in its shared memory file: a header, then fixed-size slots that
// other processes read while the owner writes. A format shared between processes (of the same
// build: the version changes with any change here), so it is spelled out in one place.
#pragma once

#include "transport/region_table.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace crescent::transport {

namespace detail {

constexpr uint64_t table_magic = 0x43524553544142ull; // "CRESTAB"
// Version 2 grew the slot from 64 to 192 bytes for GPU regions (location, PCI address,
// allocation offset, address and the 64-byte IPC handle). One slot, under one sequence number,
// keeps a reader from pairing one region's handle with another's IPC handle; the pages of a
// memfd that are never written cost nothing, so the larger table costs address space only.
constexpr uint32_t table_version = 2;

struct table_header {
  std::atomic<uint64_t> magic;
  std::atomic<uint64_t> version_capacity; // version << 32 | capacity
  uint64_t reserved[6];
};

constexpr size_t ipc_words = ipc_handle_bytes / sizeof(uint64_t);

// One region, 192 bytes. Every field is atomic: readers in other processes read while the
// owner writes, and the sequence number (odd while writing) tells them to retry.
struct table_slot {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> region_id;
  std::atomic<uint64_t> access_key;
  std::atomic<uint64_t> length;
  std::atomic<uint64_t> segment_id;
  std::atomic<uint64_t> segment_offset;
  std::atomic<uint64_t> fd_node; // segment fd << 32 | node
  std::atomic<uint64_t> segment_inode;
  std::atomic<uint64_t> location; // kind << 56 | exportable << 48 | device ordinal (32 bits)
  std::atomic<uint64_t> pci;
  std::atomic<uint64_t> alloc_offset;
  std::atomic<uint64_t> address;
  std::atomic<uint64_t> ipc_handle[ipc_words];
  std::atomic<uint64_t> reserved[4];
};

static_assert(sizeof(table_header) == 64 && sizeof(table_slot) == 192);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");

} // namespace detail

} // namespace crescent::transport
