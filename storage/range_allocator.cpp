#include "storage/range_allocator.hpp"

#include <algorithm>
#include <bit>
#include <cassert>

namespace crescent::storage {

namespace {

// Sizes map to bins like small floats: 3 mantissa bits and an exponent. Rounding down files a
// free range where every request it serves fits; rounding up picks a bin whose every range fits.
constexpr uint32_t mantissa_bits = 3;
constexpr uint32_t mantissa_values = 1u << mantissa_bits;

uint32_t bin_round_down(uint64_t size) {
  if (size < mantissa_values)
    return static_cast<uint32_t>(size);
  const uint32_t msb = 63 - static_cast<uint32_t>(std::countl_zero(size));
  const uint32_t shift = msb - mantissa_bits;
  const uint32_t exponent = shift + 1;
  const auto mantissa = static_cast<uint32_t>((size >> shift) & (mantissa_values - 1));
  const uint32_t bin = (exponent << mantissa_bits) | mantissa;
  return bin < 256 ? bin : 255;
}

uint32_t bin_round_up(uint64_t size) {
  if (size < mantissa_values)
    return static_cast<uint32_t>(size);
  const uint32_t msb = 63 - static_cast<uint32_t>(std::countl_zero(size));
  const uint32_t shift = msb - mantissa_bits;
  uint32_t exponent = shift + 1;
  auto mantissa = static_cast<uint32_t>((size >> shift) & (mantissa_values - 1));
  if ((size & ((uint64_t{1} << shift) - 1)) != 0 && ++mantissa == mantissa_values) {
    mantissa = 0;
    ++exponent;
  }
  return (exponent << mantissa_bits) | mantissa; // may exceed 255: nothing can fit
}

} // namespace

range_allocator::range_allocator(uint64_t capacity_bytes, uint64_t unit_bytes, uint32_t ranges_max)
    : unit_(unit_bytes), units_total_(capacity_bytes / unit_bytes), units_free_(0) {
  assert(std::has_single_bit(unit_bytes) && "the unit is a power of two");
  assert(ranges_max >= 1);
  nodes_.resize(ranges_max);
  spare_.reserve(ranges_max);
  for (uint32_t i = ranges_max; i > 0; --i)
    spare_.push_back(i - 1);
  for (auto& h : bin_heads_)
    h = none;
  if (units_total_ > 0) {
    insert_free(0, units_total_, none, none);
    units_free_ = units_total_;
  }
}

uint32_t range_allocator::new_node() {
  assert(!spare_.empty());
  const uint32_t n = spare_.back();
  spare_.pop_back();
  nodes_[n] = node{};
  return n;
}

uint32_t range_allocator::insert_free(uint64_t offset, uint64_t size, uint32_t prev_phys,
                                      uint32_t next_phys) {
  const uint32_t n = new_node();
  const uint32_t bin = bin_round_down(size);
  auto& x = nodes_[n];
  x.offset = offset;
  x.size = size;
  x.prev_phys = prev_phys;
  x.next_phys = next_phys;
  x.bin = bin;
  x.next_free = bin_heads_[bin];
  if (x.next_free != none)
    nodes_[x.next_free].prev_free = n;
  bin_heads_[bin] = n;
  bin_bits_[bin / 8] |= uint8_t(1u << (bin % 8));
  top_bits_ |= 1u << (bin / 8);
  return n;
}

void range_allocator::unlink_free(uint32_t n) {
  auto& x = nodes_[n];
  if (x.prev_free != none)
    nodes_[x.prev_free].next_free = x.next_free;
  else
    bin_heads_[x.bin] = x.next_free;
  if (x.next_free != none)
    nodes_[x.next_free].prev_free = x.prev_free;
  if (bin_heads_[x.bin] == none) {
    bin_bits_[x.bin / 8] &= uint8_t(~(1u << (x.bin % 8)));
    if (bin_bits_[x.bin / 8] == 0)
      top_bits_ &= ~(1u << (x.bin / 8));
  }
  x.prev_free = x.next_free = none;
}

uint32_t range_allocator::find_bin(uint32_t min_bin) const {
  if (min_bin >= bin_count)
    return none;
  const uint32_t top = min_bin / 8;
  const uint32_t low = bin_bits_[top] & (0xffu << (min_bin % 8));
  if (low != 0)
    return top * 8 + static_cast<uint32_t>(std::countr_zero(low));
  const uint32_t above = top + 1 < 32 ? top_bits_ & (~0u << (top + 1)) : 0;
  if (above == 0)
    return none;
  const auto t = static_cast<uint32_t>(std::countr_zero(above));
  return t * 8 + static_cast<uint32_t>(std::countr_zero(unsigned{bin_bits_[t]}));
}

std::optional<range> range_allocator::allocate(uint64_t size_bytes) {
  if (size_bytes == 0)
    return std::nullopt;
  const uint64_t units = (size_bytes + unit_ - 1) / unit_;
  // A split may need one more node for the remainder.
  if (spare_.size() < 1)
    return std::nullopt;
  const uint32_t bin = find_bin(bin_round_up(units));
  if (bin == none)
    return std::nullopt;
  const uint32_t n = bin_heads_[bin];
  unlink_free(n);
  auto& x = nodes_[n];
  assert(x.size >= units);
  if (x.size > units) {
    const uint32_t rest = insert_free(x.offset + units, x.size - units, n, x.next_phys);
    auto& y = nodes_[n]; // insert_free may not reallocate (fixed pool), but stay explicit
    if (y.next_phys != none)
      nodes_[y.next_phys].prev_phys = rest;
    y.next_phys = rest;
    y.size = units;
  }
  auto& used = nodes_[n];
  used.used = true;
  used.bin = none;
  units_free_ -= units;
  ++ranges_used_;
  return range{used.offset * unit_, units * unit_, n};
}

void range_allocator::free(const range& r) {
  assert(r.node < nodes_.size());
  auto& x = nodes_[r.node];
  assert(x.used && x.offset * unit_ == r.offset && "free of a range that is not allocated");
  units_free_ += x.size;
  --ranges_used_;
  uint64_t offset = x.offset;
  uint64_t size = x.size;
  uint32_t prev = x.prev_phys;
  uint32_t next = x.next_phys;
  spare_.push_back(r.node);
  x.used = false;
  if (prev != none && !nodes_[prev].used) {
    unlink_free(prev);
    offset = nodes_[prev].offset;
    size += nodes_[prev].size;
    const uint32_t before = nodes_[prev].prev_phys;
    spare_.push_back(prev);
    prev = before;
  }
  if (next != none && !nodes_[next].used) {
    unlink_free(next);
    size += nodes_[next].size;
    const uint32_t after = nodes_[next].next_phys;
    spare_.push_back(next);
    next = after;
  }
  const uint32_t merged = insert_free(offset, size, prev, next);
  if (prev != none)
    nodes_[prev].next_phys = merged;
  if (next != none)
    nodes_[next].prev_phys = merged;
}

std::optional<std::vector<range>>
range_allocator::restore(const std::vector<std::pair<uint64_t, uint64_t>>& used) {
  assert(ranges_used_ == 0 && "restore needs a fresh allocator");
  // Check everything before changing anything.
  uint64_t at = 0;
  size_t nodes_needed = 0;
  for (const auto& [offset, size] : used) {
    if (offset % unit_ != 0 || size == 0 || offset < at * unit_ || offset / unit_ > units_total_ ||
        (size + unit_ - 1) / unit_ > units_total_ - offset / unit_)
      return std::nullopt;
    nodes_needed += (offset / unit_ > at ? 2 : 1);
    at = offset / unit_ + (size + unit_ - 1) / unit_;
  }
  if (nodes_needed + 1 > nodes_.size())
    return std::nullopt;
  // Start over: one free range of everything, then cut the used ranges out in address order.
  for (auto& h : bin_heads_)
    h = none;
  top_bits_ = 0;
  for (auto& b : bin_bits_)
    b = 0;
  spare_.clear();
  for (uint32_t i = static_cast<uint32_t>(nodes_.size()); i > 0; --i)
    spare_.push_back(i - 1);
  std::vector<range> out;
  uint32_t prev = none;
  at = 0;
  auto link = [&](uint32_t n) {
    nodes_[n].prev_phys = prev;
    if (prev != none)
      nodes_[prev].next_phys = n;
    prev = n;
  };
  for (const auto& [offset, size] : used) {
    const uint64_t start = offset / unit_;
    if (start > at)
      link(insert_free(at, start - at, none, none));
    const uint32_t n = new_node();
    nodes_[n].offset = start;
    nodes_[n].size = (size + unit_ - 1) / unit_;
    nodes_[n].used = true;
    link(n);
    out.push_back(range{start * unit_, nodes_[n].size * unit_, n});
    at = start + nodes_[n].size;
  }
  if (at < units_total_)
    link(insert_free(at, units_total_ - at, none, none));
  units_free_ = units_total_;
  for (const auto& r : out)
    units_free_ -= r.size / unit_;
  ranges_used_ = static_cast<uint32_t>(out.size());
  return out;
}

bool range_allocator::consistent() const {
  // Walk address order from the node at offset 0.
  uint32_t first = none;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const bool spare = std::find(spare_.begin(), spare_.end(), i) != spare_.end();
    if (!spare && nodes_[i].offset == 0 && nodes_[i].prev_phys == none)
      first = i;
  }
  if (units_total_ == 0)
    return true;
  uint64_t at = 0, free_units = 0;
  uint32_t used = 0, prev = none;
  bool last_free = false;
  for (uint32_t n = first; n != none; n = nodes_[n].next_phys) {
    const auto& x = nodes_[n];
    if (x.offset != at || x.prev_phys != prev)
      return false;
    if (!x.used && last_free)
      return false; // two free neighbours should have merged
    last_free = !x.used;
    if (x.used)
      ++used;
    else
      free_units += x.size;
    at += x.size;
    prev = n;
  }
  return at == units_total_ && free_units == units_free_ && used == ranges_used_;
}

} // namespace crescent::storage
