// The KV pages of a coupled instance (its GPU memory, in vLLM's terms) and, with prefix
// caching, the pages of whole prompt blocks kept after their sequences end, by block key, so that
// a later prompt with the same prefix shares them instead of computing them again. A cached page
// nobody uses is evicted, least recently used first, only when a sequence needs its room.
//
// Pages are numbers [0, pages); which memory stands behind them is the worker's business. A
// shared page is never written again: only whole blocks of a prompt are published, and a
// sequence writes only past its reused prefix. Not thread-safe: one per worker actor.
#pragma once

#include "messages/block_key.hpp"

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace crescent {

class page_cache {
 public:
  static constexpr uint32_t pages_max = 1u << 24;

  /// `pages` pages, at most pages_max (asserted); `caching`: keep published pages after use.
  page_cache(uint32_t pages, bool caching);

  /// A sequence's pages: the first `shared` were found in the cache (their KV is there).
  struct lease {
    std::vector<uint32_t> pages;
    uint32_t shared = 0;
  };

  /// `pages_needed` pages for a sequence whose leading blocks have `keys`: the longest run of
  /// them in the cache, at most `shared_max`, is shared, and the rest are free pages or evicted
  /// ones. None, and nothing changed, when that many cannot be had.
  std::optional<lease> acquire(std::span<const block_key> keys, uint32_t shared_max,
                               uint32_t pages_needed);

  /// How many of the leading `keys` the cache holds, without taking them.
  uint32_t match(std::span<const block_key> keys) const;

  /// Page `page`, in use, now holds the whole block `key`: kept for later sequences once its
  /// users are done. False (nothing kept) without caching, or when another page holds `key`.
  bool publish(uint32_t page, block_key key);

  /// A sequence is done with its pages: cached ones stay until evicted, the rest are free.
  void release(std::span<const uint32_t> pages);

  /// Pages a sequence could be given now: free, and cached with no user.
  uint32_t available() const { return static_cast<uint32_t>(free_.size() + idle_.size()); }
  uint32_t capacity() const { return static_cast<uint32_t>(pages_.size()); }
  uint32_t cached() const { return static_cast<uint32_t>(by_key_.size()); }

  /// Keys evicted since the last call, oldest first (for the conductor's prefix index).
  std::vector<block_key> take_evicted();
  uint64_t evictions() const { return evictions_; }

 private:
  struct page {
    uint32_t users = 0;
    bool keyed = false;
    block_key key;
    std::list<uint32_t>::iterator idle; // in idle_ while keyed with no user
  };

  uint32_t take_page(); // a free page, or the least recently used idle one; one must exist
  void hold(uint32_t p);

  bool caching_;
  std::vector<page> pages_;
  std::vector<uint32_t> free_; // a stack
  std::list<uint32_t> idle_;   // keyed pages with no user, least recently used first
  std::unordered_map<block_key, uint32_t> by_key_;
  std::vector<block_key> evicted_;
  uint64_t evictions_ = 0;
};

} // namespace crescent
