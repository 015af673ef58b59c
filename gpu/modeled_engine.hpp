// The modeled engine: the engine interface with no arithmetic, for simulated time at paper
// scale. Its time comes from a profile (modeled_profile.hpp); its KV pages are stand-ins.
//
// A stand-in is 64 bytes of real memory a layer standing for one page of config().page_bytes()
// (5 KiB for about 160 MiB for LLaMA3-70B at 512 tokens a page), so a pool of millions of tokens
// costs only metadata, while the pool, the transfer engine and the checksums still move and verify
// real bytes. A stand-in records a content hash chained over every token written into its page and
// the pages before it, as the KV itself depends on them. Writing position i checks that the
// stand-ins hold positions [0, i) of this sequence (the page before complete, this page filled
// up to i) and fails with the position that has no KV otherwise; the greedy token after a
// position is drawn from the content hashes of every page up to it. So the tokens of a request
// decoded after disaggregated prefill, prefix reuse and transfer equal those of one monolithic call
// exactly when every page arrived intact, as with the reference engine, and a lost or mixed-up page
// is an error or different tokens, never silence.
//
// The engine rewrites a sequence's last written position (a prompt reused whole recomputes its
// last token, for the logits), which leaves the stand-in as it was; any other position below
// what a page holds is refused, since a stand-in keeps no older state.
#pragma once

#include "gpu/engine.hpp"
#include "gpu/modeled_profile.hpp"
#include "gpu/shared_cores.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace crescent::gpu {

/// A stand-in page is one slot of standin_layer_bytes per layer, in layer order as the KV of a
/// real page (model_config::page_bytes), so that a range of layers is a slice of it with the
/// same share of the bytes: layer-wise streaming moves, and the modeled links time, each
/// layer's part. Each slot holds the whole stand-in and its layer; a page's slots agree when
/// its layers were all written and all arrived.
inline constexpr size_t standin_layer_bytes = 64;
inline size_t standin_page_bytes(const model_config& cfg) {
  return standin_layer_bytes * cfg.layers;
}

/// What a slot holds (little-endian, at the start of its 64 bytes; the rest is zero).
struct standin_page {
  uint64_t magic = 0;          // standin_magic: this page holds KV of some sequence
  uint64_t fingerprint = 0;    // of the model that wrote it
  uint64_t content = 0;        // chained over every token up to the page's last written one
  uint64_t content_before = 0; // the same, before that last token
  uint32_t tokens = 0;         // positions of the page written, from its first
  uint32_t page_index = 0;     // its place in its sequence
  uint32_t layer = 0;          // the slot's
};

inline constexpr uint64_t standin_magic = 0x4750564b54534552ull; // "RESTKVPG"

/// Reads the slot of `layer` in the stand-in page at `page`.
standin_page read_standin(const std::byte* page, uint32_t layer = 0);
/// Writes `s` into the slot of s.layer.
void write_standin(std::byte* page, const standin_page& s);

/// A modeled engine for `cfg`, whose shape must be the profile's (check_model). With `cores`
/// (required for a profile with shared_cores), every call's time is slowed by the calls that
/// share them, and a call made after the engine computed nothing for a while takes the
/// profile's warm-up after idle too (modeled_profile::warmup_idle_ms; none without it).
caf::expected<std::unique_ptr<engine>>
make_modeled_engine(const model_config& cfg, std::shared_ptr<const modeled_profile> profile,
                    std::shared_ptr<shared_cores> cores = nullptr);

} // namespace crescent::gpu
