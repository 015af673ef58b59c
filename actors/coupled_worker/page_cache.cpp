#include "actors/coupled_worker/page_cache.hpp"

#include <algorithm>
#include <cassert>

namespace crescent {

namespace {

// Evicted keys waiting for the next report: a report carries at most this many (the conductor's
// limit); older ones beyond it are forgotten, and the conductor's index then promises a block
// that is gone until the instance is asked for it (a miss, computed again: never wrong data).
constexpr size_t evicted_kept_max = 1u << 16;

} // namespace

page_cache::page_cache(uint32_t pages, bool caching) : caching_(caching), pages_(pages) {
  assert(pages <= pages_max);
  free_.reserve(pages);
  for (uint32_t p = pages; p > 0; --p)
    free_.push_back(p - 1); // page 0 on top
}

uint32_t page_cache::match(std::span<const block_key> keys) const {
  uint32_t n = 0;
  while (n < keys.size() && by_key_.count(keys[n]) != 0)
    ++n;
  return n;
}

std::optional<page_cache::lease> page_cache::acquire(std::span<const block_key> keys,
                                                     uint32_t shared_max, uint32_t pages_needed) {
  const uint32_t shared = std::min({match(keys), shared_max, pages_needed});
  // Shared pages with no user are idle: counted as available, but taken as themselves.
  uint32_t shared_idle = 0;
  for (uint32_t k = 0; k < shared; ++k)
    shared_idle += pages_[by_key_.at(keys[k])].users == 0 ? 1 : 0;
  if (pages_needed - shared > available() - shared_idle)
    return std::nullopt;
  lease out;
  out.shared = shared;
  out.pages.reserve(pages_needed);
  for (uint32_t k = 0; k < shared; ++k) {
    const uint32_t p = by_key_.at(keys[k]);
    hold(p);
    out.pages.push_back(p);
  }
  while (out.pages.size() < pages_needed) {
    const uint32_t p = take_page();
    hold(p);
    out.pages.push_back(p);
  }
  return out;
}

void page_cache::hold(uint32_t p) {
  auto& pg = pages_[p];
  if (pg.users == 0 && pg.keyed)
    idle_.erase(pg.idle);
  ++pg.users;
}

uint32_t page_cache::take_page() {
  if (!free_.empty()) {
    const uint32_t p = free_.back();
    free_.pop_back();
    return p;
  }
  assert(!idle_.empty());
  const uint32_t p = idle_.front();
  idle_.pop_front();
  auto& pg = pages_[p];
  by_key_.erase(pg.key);
  if (evicted_.size() < evicted_kept_max)
    evicted_.push_back(pg.key);
  ++evictions_;
  pg.keyed = false;
  pg.key = {};
  return p;
}

bool page_cache::publish(uint32_t page, block_key key) {
  assert(page < pages_.size() && pages_[page].users > 0);
  auto& pg = pages_[page];
  if (!caching_ || pg.keyed || by_key_.count(key) != 0)
    return false;
  pg.keyed = true;
  pg.key = key;
  by_key_.emplace(key, page);
  return true;
}

void page_cache::release(std::span<const uint32_t> pages) {
  for (const uint32_t p : pages) {
    auto& pg = pages_[p];
    assert(pg.users > 0);
    if (--pg.users > 0)
      continue;
    if (pg.keyed)
      pg.idle = idle_.insert(idle_.end(), p); // most recently used last
    else
      free_.push_back(p);
  }
}

std::vector<block_key> page_cache::take_evicted() {
  std::vector<block_key> out;
  out.swap(evicted_);
  return out;
}

} // namespace crescent
