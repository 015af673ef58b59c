#include "apps/profile/profile_command.hpp"

#include "actors/cluster/cluster_config.hpp"
#include "actors/cluster/profile_yaml.hpp"
#include "gpu/engine.hpp"
#include "gpu/least_squares.hpp"
#include "messages/errors.hpp"
#include "storage/checksum.hpp"
#include "storage/ssd_tier.hpp"
#include "transport/cpu_affinity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

namespace crescent::cli {

namespace {

int fail(const std::string& what) {
  fmt::print(stderr, "crescent profile: {}\n", what);
  return 2;
}

// KV memory for `sequences` sequences of up to `tokens` tokens each.
struct kv_memory {
  kv_memory(const gpu::model_config& m, size_t sequences, size_t tokens)
      : pages_per_sequence((tokens + m.block_tokens - 1) / m.block_tokens),
        bytes(sequences * pages_per_sequence * m.page_bytes()) {
    for (size_t s = 0; s < sequences; ++s) {
      pages.emplace_back();
      for (size_t p = 0; p < pages_per_sequence; ++p)
        pages.back().push_back(bytes.data() + (s * pages_per_sequence + p) * m.page_bytes());
    }
  }
  size_t pages_per_sequence;
  std::vector<std::byte> bytes;
  std::vector<std::vector<std::byte*>> pages;
};

// The median time of `repeats` calls, each made after the thread slept `idle_ms` (0: back to
// back).
template <class F>
double median_ns(uint32_t repeats, F&& call, double idle_ms = 0) {
  std::vector<double> t;
  for (uint32_t i = 0; i < repeats; ++i) {
    if (idle_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
    const auto start = std::chrono::steady_clock::now();
    call();
    t.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<uint32_t> grid(std::vector<uint32_t> xs, uint32_t lo, uint32_t hi) {
  std::set<uint32_t> out;
  for (auto x : xs)
    out.insert(std::clamp(x, lo, hi));
  return {out.begin(), out.end()};
}

struct points {
  std::vector<std::vector<double>> features;
  std::vector<double> ns;
};

// Prefill of n tokens after p cached ones, over one sequence whose KV covers the context.
caf::expected<points> measure_prefill(gpu::engine& e, const cluster_config& cfg,
                                      const profile_options& opt) {
  const auto& m = cfg.model;
  const uint32_t ctx = opt.quick ? std::min(m.context_tokens_max, 1024u) : m.context_tokens_max;
  const uint32_t chunk = std::min(cfg.prefill.chunk_tokens, ctx / 2);
  std::vector<uint32_t> tokens(ctx);
  for (uint32_t i = 0; i < ctx; ++i)
    tokens[i] = (i * 31 + 7) % m.vocab;
  kv_memory kv{m, 1, ctx};
  for (uint32_t done = 0; done < ctx; done += chunk) {
    const uint32_t n = std::min(chunk, ctx - done);
    if (auto r = e.prefill({kv.pages[0], done}, std::span{tokens}.subspan(done, n)); !r)
      return std::move(r.error());
  }
  points out;
  for (auto n : grid({1, 16, 64, chunk / 2, chunk}, 1, chunk))
    for (auto p : grid({0, 256, 1024, ctx / 4, ctx / 2, ctx - n}, 0, ctx - n)) {
      caf::error err;
      const double ns = median_ns(opt.repeats, [&] {
        if (auto r = e.prefill({kv.pages[0], p}, std::span{tokens}.subspan(p, n)); !r)
          err = std::move(r.error());
      });
      if (err)
        return err;
      const double keys = double(n) * p + double(n) * (n + 1) / 2;
      out.features.push_back({1.0, double(n), keys, double(p)});
      out.ns.push_back(ns);
    }
  return out;
}

// Decode steps of B sequences holding c tokens each (distinct memory per sequence, as in a
// decode instance).
caf::expected<points> measure_decode(gpu::engine& e, const cluster_config& cfg,
                                     const profile_options& opt) {
  const auto& m = cfg.model;
  const uint32_t ctx_max = opt.quick ? std::min(m.context_tokens_max, 1024u) : 2048u;
  const uint32_t batch_max = std::min<uint32_t>(cfg.decode.batch_max, opt.quick ? 8 : 64);
  const uint32_t ctx = std::min(ctx_max, m.context_tokens_max - 1);
  std::vector<uint32_t> tokens(ctx);
  for (uint32_t i = 0; i < ctx; ++i)
    tokens[i] = (i * 17 + 3) % m.vocab;
  kv_memory kv{m, batch_max, ctx + 1};
  for (uint32_t done = 0; done < ctx; done += 128) {
    const uint32_t n = std::min(128u, ctx - done);
    if (auto r = e.prefill({kv.pages[0], done}, std::span{tokens}.subspan(done, n)); !r)
      return std::move(r.error());
  }
  const size_t sequence_bytes = kv.pages_per_sequence * m.page_bytes();
  for (uint32_t s = 1; s < batch_max; ++s)
    std::memcpy(kv.pages[s][0], kv.pages[0][0], sequence_bytes);
  points out;
  // Batches and contexts as a decode instance of this small model meets them (a few hundred to
  // a few thousand tokens): past the caches, time per token grows, and a fit over contexts no
  // request reaches would distort the ones that matter.
  for (auto b : grid({1, 2, 4, 8, 16, batch_max}, 1, batch_max))
    for (auto c : grid({16, 128, 512, 1024, 2048}, 1, ctx)) {
      std::vector<gpu::sequence_ref> seqs;
      for (uint32_t s = 0; s < b; ++s)
        seqs.push_back({kv.pages[s], c});
      const std::vector<uint32_t> in(b, tokens[c % ctx]);
      caf::error err;
      const double ns = median_ns(opt.repeats, [&] {
        if (auto r = e.decode(seqs, in); !r)
          err = std::move(r.error());
      });
      if (err)
        return err;
      out.features.push_back({1.0, double(b), double(b) * (c + 1)});
      out.ns.push_back(ns);
    }
  return out;
}

// Warm-up after idle: the extra time of a call made after the thread slept idle_ms[i], over the
// same call made back to back (medians), for a prefill chunk and a decode step of one sequence.
struct warmup_points {
  std::vector<double> idle_ms;
  std::vector<double> prefill_ns;
  std::vector<double> decode_ns;
  double prefill_warm_ns = 0;
  double decode_warm_ns = 0;
};

constexpr uint32_t warmup_repeats_max = 9;

caf::expected<warmup_points> measure_warmup(gpu::engine& e, const cluster_config& cfg,
                                            const profile_options& opt) {
  const auto& m = cfg.model;
  const uint32_t ctx = std::min(512u, m.context_tokens_max - 1);
  const uint32_t chunk = std::min(cfg.prefill.chunk_tokens, ctx);
  std::vector<uint32_t> tokens(ctx);
  for (uint32_t i = 0; i < ctx; ++i)
    tokens[i] = (i * 13 + 5) % m.vocab;
  kv_memory kv{m, 1, ctx + 1};
  caf::error err;
  auto prefill = [&] {
    if (auto r = e.prefill({kv.pages[0], 0}, std::span{tokens}.subspan(0, chunk)); !r)
      err = std::move(r.error());
  };
  for (uint32_t done = 0; done < ctx; done += chunk)
    if (auto r = e.prefill({kv.pages[0], done},
                           std::span{tokens}.subspan(done, std::min(chunk, ctx - done)));
        !r)
      return std::move(r.error());
  const std::vector<gpu::sequence_ref> seqs{{kv.pages[0], ctx}};
  const std::vector<uint32_t> in{tokens[0]};
  auto decode = [&] {
    if (auto r = e.decode(seqs, in); !r)
      err = std::move(r.error());
  };
  warmup_points out;
  out.idle_ms = opt.quick ? std::vector<double>{5, 50} : std::vector<double>{1, 5, 20, 100, 400};
  // Each repeat sleeps: at most warmup_repeats_max of them a point (about 10 s in all).
  const uint32_t repeats = std::min(opt.repeats, warmup_repeats_max);
  out.prefill_warm_ns = median_ns(repeats, prefill);
  out.decode_warm_ns = median_ns(repeats, decode);
  for (double idle : out.idle_ms) {
    out.prefill_ns.push_back(
        std::max(0.0, median_ns(repeats, prefill, idle) - out.prefill_warm_ns));
    out.decode_ns.push_back(std::max(0.0, median_ns(repeats, decode, idle) - out.decode_warm_ns));
  }
  if (err)
    return err;
  return out;
}

std::string warmup_yaml(const warmup_points& w, uint32_t repeats) {
  auto list = [](const std::vector<double>& xs) {
    std::string out;
    for (double x : xs)
      out += fmt::format("{}{:.6g}", out.empty() ? "" : ", ", x);
    return "[" + out + "]";
  };
  return fmt::format("warmup:                   # extra ns of a call after its instance sat idle "
                     "idle_ms, over back-to-back calls\n"
                     "  idle_ms: {}  # median of {} calls a point\n"
                     "  prefill_extra_ns: {}\n  decode_extra_ns: {}\n",
                     list(w.idle_ms), std::min(repeats, warmup_repeats_max), list(w.prefill_ns),
                     list(w.decode_ns));
}

std::string format_warmup(const warmup_points& w) {
  std::string out = fmt::format("warm-up after idle: a prefill chunk {:.0f} ns and a decode step "
                                "of one sequence {:.0f} ns back to back\n",
                                w.prefill_warm_ns, w.decode_warm_ns);
  for (size_t i = 0; i < w.idle_ms.size(); ++i)
    out += fmt::format("  after {:>6.0f} ms idle  prefill {:>+12.0f} ns  decode {:>+12.0f} ns\n",
                       w.idle_ms[i], w.prefill_ns[i], w.decode_ns[i]);
  return out;
}

double memcpy_bytes_per_s(uint32_t repeats) {
  std::vector<std::byte> a(64u << 20, std::byte{1}), b(64u << 20);
  const double ns = median_ns(repeats, [&] { std::memcpy(b.data(), a.data(), a.size()); });
  return static_cast<double>(a.size()) / ns * 1e9;
}

// The SSD tier as a block owner meets it (storage/ssd_tier: the data file and its RocksDB index,
// synced as the cluster's store.sync_commits says), in a temporary directory beside the system's
// others: puts and gets of one page and of 64 pages, each the median of `repeats` calls. The
// line through the two gives the latency (its intercept) and the bandwidth (its slope); a read
// of a block just written may come from the page cache, as the owner's would.
struct ssd_points {
  double read_bytes_per_s = 0, write_bytes_per_s = 0, latency_s = 0;
  double page_read_ns = 0, page_write_ns = 0, large_read_ns = 0, large_write_ns = 0;
  uint64_t page_bytes = 0, large_bytes = 0;
};

// Median nanoseconds of `repeats` puts of new blocks of `bytes` (keys from `first` on, left in
// the tier), or of gets of the middle one of them.
caf::expected<double> time_ssd(storage::ssd_tier& tier, uint64_t first, uint64_t bytes, bool write,
                               uint32_t repeats) {
  std::vector<std::byte> block(bytes, std::byte{0x3c}), back(bytes);
  const uint64_t sum = storage::block_checksum(block);
  uint64_t next = first;
  caf::error failed;
  const double ns = median_ns(repeats, [&] {
    auto err = write ? tier.put(block_key{0, next++}, block, sum)
                     : tier.get(block_key{0, first + repeats / 2}, back);
    if (err && !failed)
      failed = std::move(err);
  });
  if (failed)
    return failed;
  return ns;
}

// The line through (small bytes, small_ns) and (large bytes, large_ns): its slope as a bandwidth,
// its intercept (returned) as a latency. A slope of noise (the large call no slower than the
// small one) is no bandwidth: the large call's own rate then, and no latency.
double fit_ssd_line(uint64_t small, double small_ns, uint64_t large, double large_ns,
                    double& bytes_per_s) {
  if (large_ns <= small_ns) {
    bytes_per_s = static_cast<double>(large) / large_ns * 1e9;
    return 0.0;
  }
  bytes_per_s = static_cast<double>(large - small) / (large_ns - small_ns) * 1e9;
  return std::max(0.0, small_ns - static_cast<double>(small) / bytes_per_s * 1e9);
}

caf::expected<ssd_points> measure_ssd(const cluster_config& cfg, uint32_t repeats) {
  std::string dir = (std::filesystem::temp_directory_path() / "crescent-profile-ssd-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr)
    return make_error(errc::io_error, "cannot create a temporary directory for the SSD tier");
  ssd_points out;
  out.page_bytes = cfg.model.page_bytes();
  out.large_bytes = 64 * out.page_bytes;
  storage::ssd_options sopt;
  sopt.directory = dir;
  // Both sizes' blocks stay until the end.
  sopt.capacity_bytes =
      uint64_t{repeats} * (out.large_bytes + out.page_bytes) + (uint64_t{1} << 20);
  sopt.sync_writes = cfg.store.sync_commits;
  auto times = [&]() -> caf::expected<std::array<double, 4>> {
    auto tier = storage::ssd_tier::open(sopt);
    if (!tier)
      return std::move(tier.error());
    std::array<double, 4> ns{};
    const std::array<std::pair<uint64_t, bool>, 4> calls = {{{out.page_bytes, true},
                                                             {out.page_bytes, false},
                                                             {out.large_bytes, true},
                                                             {out.large_bytes, false}}};
    for (size_t i = 0; i < calls.size(); ++i) {
      const uint64_t first = 1 + (i / 2) * repeats;
      auto t = time_ssd(**tier, first, calls[i].first, calls[i].second, repeats);
      if (!t)
        return std::move(t.error());
      ns[i] = *t;
    }
    return ns;
  }();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (!times)
    return std::move(times.error());
  std::tie(out.page_write_ns, out.page_read_ns, out.large_write_ns, out.large_read_ns) =
      std::tuple_cat(*times);
  const double write_latency = fit_ssd_line(out.page_bytes, out.page_write_ns, out.large_bytes,
                                            out.large_write_ns, out.write_bytes_per_s);
  const double read_latency = fit_ssd_line(out.page_bytes, out.page_read_ns, out.large_bytes,
                                           out.large_read_ns, out.read_bytes_per_s);
  // One latency for both (the profile's): the smaller, since the write's includes its sync.
  out.latency_s = std::min(write_latency, read_latency) / 1e9;
  return out;
}

std::string ssd_yaml(const ssd_points& s, bool synced) {
  auto clamp = [](double bytes_per_s) { return std::clamp(bytes_per_s, 1e6, 1e14); };
  return fmt::format("  # The SSD tier in the temporary directory (storage/ssd_tier, writes {}),\n"
                     "  # measured: a page ({} bytes) and 64 pages, put and got back.\n"
                     "  ssd_read_bytes_per_s: {:.4g}\n  ssd_write_bytes_per_s: {:.4g}\n"
                     "  ssd_latency_s: {:.4g}\n",
                     synced ? "synced" : "unsynced", s.page_bytes, clamp(s.read_bytes_per_s),
                     clamp(s.write_bytes_per_s), std::min(1.0, s.latency_s));
}

std::string format_ssd(const ssd_points& s) {
  return fmt::format(
      "SSD tier: a page ({} bytes) written in {:.0f} ns, read in {:.0f} ns; 64 pages "
      "written in {:.0f} ns, read in {:.0f} ns: write {:.3g} B/s, read {:.3g} B/s, "
      "latency {:.3g} s\n",
      s.page_bytes, s.page_write_ns, s.page_read_ns, s.large_write_ns, s.large_read_ns,
      s.write_bytes_per_s, s.read_bytes_per_s, s.latency_s);
}

// The CPUs this process may run on: what the actor system's threads, and so the instances'
// compute calls, share.
size_t cpus() {
  auto allowed = transport::allowed_cpus();
  return allowed && !allowed->empty() ? allowed->size()
                                      : std::max(1u, std::thread::hardware_concurrency());
}

double parameters_of(const gpu::model_config& m) {
  const double d = m.d_model, kv = m.kv_dim();
  return m.layers * (2 * d * d + 2 * d * kv + 3 * d * m.ffn) + 2.0 * m.vocab * d;
}

std::string profile_yaml(const profile_options& opt, const cluster_config& cfg,
                         const gpu::fit_result& prefill, const gpu::fit_result& decode,
                         size_t prefill_points, size_t decode_points, double copy_bytes_per_s,
                         const std::string& machine_more) {
  const auto& m = cfg.model;
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::string out = fmt::format(
      "# The reference engine on this machine, measured by `crescent profile` on {}: {} prefill\n"
      "# and {} decode points, each the median of {} calls; the fit below (least squares of\n"
      "# relative errors, non-negative terms; gpu/modeled_profile.hpp) decides compute times.\n"
      "name: {}\n"
      "description: the reference engine ({} layers, d_model {}) on the CPU of the machine that "
      "measured it\n",
      date, prefill_points, decode_points, opt.repeats, opt.name, m.layers, m.d_model);
  out += fmt::format("model:\n  layers: {}\n  d_model: {}\n  heads: {}\n  kv_heads: {}\n"
                     "  ffn: {}\n  vocab: {}\n  kv_element_bytes: {}\n  parameters: {}\n"
                     "  weight_element_bytes: 4\n",
                     m.layers, m.d_model, m.heads, m.kv_heads, m.ffn, m.vocab, m.kv_element_bytes,
                     parameters_of(m));
  out += fmt::format("machine:\n  gpus: 1                 # none: one worker thread on the CPU\n"
                     "  h2d_bytes_per_s: {:.4g}  # memcpy, measured: KV moves by in-process "
                     "copies\n  nic_bytes_per_s: {:.4g}  # the same: the cluster is one process\n"
                     "  nic_latency_s: 0\n"
                     "  shared_cores: {}         # the instances share the CPUs this process may "
                     "use\n",
                     copy_bytes_per_s, copy_bytes_per_s, cpus());
  out += machine_more;
  out += fmt::format("fit:\n  prefill_base_ns: {:.6g}\n  prefill_per_token_ns: {:.6g}\n"
                     "  prefill_per_key_ns: {:.6g}\n  prefill_per_cached_token_ns: {:.6g}\n"
                     "  decode_base_ns: {:.6g}\n"
                     "  decode_per_sequence_ns: {:.6g}\n  decode_per_context_token_ns: {:.6g}\n"
                     "  prefill_fit_error: {:.4f}   # rms relative, over the prefill points\n"
                     "  decode_fit_error: {:.4f}    # rms relative, over the decode points\n",
                     prefill.coefficients[0], prefill.coefficients[1], prefill.coefficients[2],
                     prefill.coefficients[3], decode.coefficients[0], decode.coefficients[1],
                     decode.coefficients[2], prefill.rms_relative_error, decode.rms_relative_error);
  return out;
}

std::string format_points(const char* what, const points& p, const gpu::fit_result& f) {
  std::string out = fmt::format("{}: {} points, rms relative error {:.1f}%\n", what, p.ns.size(),
                                100 * f.rms_relative_error);
  for (size_t i = 0; i < p.ns.size(); ++i) {
    double predicted = 0;
    for (size_t j = 0; j < f.coefficients.size(); ++j)
      predicted += f.coefficients[j] * p.features[i][j];
    out += fmt::format("  [{:>8.0f} {:>12.0f}]  measured {:>12.0f} ns  fitted {:>12.0f} ns  "
                       "{:+.1f}%\n",
                       p.features[i][1], p.features[i][2], p.ns[i], predicted,
                       100 * (predicted - p.ns[i]) / p.ns[i]);
  }
  return out;
}

} // namespace

caf::expected<measured_profile> measure_profile(const cluster_config& cfg,
                                                const profile_options& opt) {
  if (cfg.engine.kind != gpu::engine_kind::reference)
    return make_error(errc::bad_config,
                      "only the reference engine computes anything to measure (engine.kind)");
  gpu::engine_options eopt;
  eopt.timing = gpu::timing_mode::measured;
  auto engine = gpu::make_reference_engine(cfg.model, eopt);
  if (!engine)
    return std::move(engine.error());
  auto prefill = measure_prefill(**engine, cfg, opt);
  if (!prefill)
    return std::move(prefill.error());
  auto decode = measure_decode(**engine, cfg, opt);
  if (!decode)
    return std::move(decode.error());
  std::optional<warmup_points> warmup;
  if (opt.warmup) {
    auto measured = measure_warmup(**engine, cfg, opt);
    if (!measured)
      return std::move(measured.error());
    warmup = std::move(*measured);
  }
  auto ssd = measure_ssd(cfg, opt.repeats);
  if (!ssd)
    return make_error(errc::io_error, "measuring the SSD tier: " + describe(ssd.error()));
  auto pf = gpu::fit_nonnegative(prefill->features, prefill->ns);
  if (!pf)
    return std::move(pf.error());
  auto df = gpu::fit_nonnegative(decode->features, decode->ns);
  if (!df)
    return std::move(df.error());
  measured_profile out;
  out.table = format_points("prefill [n, keys]", *prefill, *pf) +
              format_points("decode [B, context tokens]", *decode, *df) +
              (warmup ? format_warmup(*warmup) : "") + format_ssd(*ssd);
  out.yaml = profile_yaml(opt, cfg, *pf, *df, prefill->ns.size(), decode->ns.size(),
                          memcpy_bytes_per_s(opt.repeats), ssd_yaml(*ssd, cfg.store.sync_commits)) +
             (warmup ? warmup_yaml(*warmup, opt.repeats) : "");
  auto parsed = parse_profile(out.yaml, opt.name);
  if (!parsed)
    return make_error(errc::internal,
                      "the profile does not read back: " + describe(parsed.error()));
  out.profile = *parsed;
  return out;
}

int profile_command(const profile_options& opt) {
  cluster_config cfg;
  if (!opt.config_path.empty()) {
    auto loaded = load_cluster_config(opt.config_path);
    if (!loaded)
      return fail(describe(loaded.error()));
    cfg = std::move(*loaded);
  }
  if (opt.out_path.empty())
    return fail("--out FILE is needed");
  // The name is written into the file as it is: letters, digits, '.', '_' and '-' only.
  if (opt.name.empty() || opt.name.size() > 128 ||
      opt.name.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != std::string::npos)
    return fail("--name '" + opt.name + "': 1 to 128 letters, digits, '.', '_' or '-'");
  fmt::print("crescent profile: the reference engine ({} layers, d_model {}, context {}), "
             "{} calls a point\n",
             cfg.model.layers, cfg.model.d_model, cfg.model.context_tokens_max, opt.repeats);
  auto measured = measure_profile(cfg, opt);
  if (!measured)
    return fail(describe(measured.error()));
  fmt::print("{}", measured->table);
  std::ofstream out{opt.out_path};
  out << measured->yaml;
  out.close();
  if (!out)
    return fail("cannot write " + opt.out_path);
  fmt::print("wrote {}\n", opt.out_path);
  return 0;
}

} // namespace crescent::cli
