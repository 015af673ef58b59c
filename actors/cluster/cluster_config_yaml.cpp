// The YAML form of cluster_config. Every key is checked: unknown keys, wrong types and values
// out of range are errors that name the file, the line and the field.
#include "actors/cluster/cluster_config.hpp"
#include "actors/cluster/transfer_config_yaml.hpp"
#include "actors/cluster/yaml_reader.hpp"
#include "messages/errors.hpp"

#include "actors/cluster/profile_yaml.hpp"

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace crescent {

namespace {

// Keys of the model section given in the file, with their lines: a modeled engine's profile
// fills in the others, and the ones given must agree with it.
using given_keys = std::map<std::string, int>;

caf::error read_model(yaml_reader& r, const YAML::Node& n, gpu::model_config& m,
                      given_keys& given) {
  auto u32 = [&](const char* key, uint32_t& out, uint64_t min, uint64_t max) {
    return std::pair<const std::string, yaml_reader::handler>{
        key, [&r, &out, &given, key, min, max](auto& v, auto& f) {
          given[key] = v.Mark().line + 1;
          return r.read_uint(v, f, out, min, max);
        }};
  };
  return r.visit(
      n, "model",
      {u32("layers", m.layers, 1, gpu::model_layers_max),
       u32("d_model", m.d_model, 1, gpu::model_d_model_max),
       u32("heads", m.heads, 1, 1024),
       u32("kv_heads", m.kv_heads, 1, 1024),
       u32("ffn", m.ffn, 1, gpu::model_ffn_max),
       u32("vocab", m.vocab, 2, gpu::model_vocab_max),
       u32("kv_element_bytes", m.kv_element_bytes, 1, 4),
       u32("block_tokens", m.block_tokens, 1, gpu::model_block_tokens_max),
       u32("context_tokens_max", m.context_tokens_max, 1, gpu::model_context_tokens_max),
       {"seed", [&](auto& v, auto& f) { return r.read_uint(v, f, m.seed, 0, UINT64_MAX); }}});
}

struct engine_keys {
  bool timing = false; // given in the file
  bool device = false;
};

caf::error read_kind(yaml_reader& r, const YAML::Node& v, const std::string& f,
                     gpu::engine_kind& kind) {
  std::string s;
  if (auto err = r.read_string(v, f, s))
    return err;
  if (s == "reference")
    kind = gpu::engine_kind::reference;
  else if (s == "modeled")
    kind = gpu::engine_kind::modeled;
  else if (s == "cuda")
    kind = gpu::engine_kind::cuda;
  else
    return r.error_at(v, f, "expected 'reference', 'modeled' or 'cuda', got '" + s + "'");
  return caf::none;
}

caf::error read_engine(yaml_reader& r, const YAML::Node& n, gpu::engine_options& e,
                       engine_keys& given) {
  return r.visit(
      n, "engine",
      {{"kind", [&](auto& v, auto& f) { return read_kind(r, v, f, e.kind); }},
       {"profile", [&](auto& v, auto& f) { return r.read_string(v, f, e.profile_name); }},
       {"device",
        [&](auto& v, auto& f) -> caf::error {
          uint32_t device = 0;
          if (auto err = r.read_uint(v, f, device, 0, gpu::cuda_device_index_max))
            return err;
          e.device = static_cast<int>(device);
          given.device = true;
          return caf::none;
        }},
       {"timing",
        [&](auto& v, auto& f) -> caf::error {
          std::string s;
          if (auto err = r.read_string(v, f, s))
            return err;
          given.timing = true;
          if (s == "measured")
            e.timing = gpu::timing_mode::measured;
          else if (s == "modeled")
            e.timing = gpu::timing_mode::modeled;
          else
            return r.error_at(v, f, "expected 'measured' or 'modeled', got '" + s + "'");
          return caf::none;
        }},
       {"modeled_flops_per_s",
        [&](auto& v, auto& f) { return r.read_double(v, f, e.modeled_flops_per_s); }}});
}

caf::error read_nodes(yaml_reader& r, const YAML::Node& n, std::vector<node_config>& nodes) {
  if (!n.IsSequence())
    return r.error_at(n, "nodes", "expected a list of nodes");
  nodes.clear();
  for (size_t i = 0; i < n.size(); ++i) {
    node_config node;
    auto name = "nodes[" + std::to_string(i) + "]";
    auto err = r.visit(
        n[i], name,
        {{"prefill",
          [&](auto& v, auto& f) { return r.read_uint(v, f, node.prefill_instances, 0, 16); }},
         {"decode",
          [&](auto& v, auto& f) { return r.read_uint(v, f, node.decode_instances, 0, 16); }},
         {"coupled",
          [&](auto& v, auto& f) { return r.read_uint(v, f, node.coupled_instances, 0, 16); }},
         {"pool_mib",
          [&](auto& v, auto& f) { return r.read_size(v, f, node.pool_bytes, 20, 1, 1u << 20); }},
         {"pool_tokens",
          [&](auto& v, auto& f) {
            return r.read_uint(v, f, node.pool_tokens, 1, uint64_t{1} << 40);
          }},
         {"ssd_mib",
          [&](auto& v, auto& f) { return r.read_size(v, f, node.ssd_bytes, 20, 0, 1u << 24); }},
         {"ssd_tokens",
          [&](auto& v, auto& f) {
            return r.read_uint(v, f, node.ssd_tokens, 1, uint64_t{1} << 40);
          }},
         {"devices",
          [&](auto& v, auto& f) -> caf::error {
            if (!v.IsSequence() || v.size() == 0 || v.size() > node_devices_max)
              return r.error_at(v, f, "expected a list of 1 to 16 CUDA device indexes");
            node.devices.assign(v.size(), 0);
            for (size_t k = 0; k < v.size(); ++k)
              if (auto e = r.read_uint(v[k], f, node.devices[k], 0, gpu::cuda_device_index_max))
                return e;
            return caf::none;
          }},
         {"address", [&](auto& v, auto& f) -> caf::error {
            if (auto e = r.read_string(v, f, node.address))
              return e;
            if (auto a = parse_node_address(node.address); !a)
              return r.error_at(v, f, describe(a.error()));
            return caf::none;
          }}});
    if (err)
      return err;
    nodes.push_back(node);
  }
  return caf::none;
}

template <class Enum>
auto named(yaml_reader& r, Enum& out, const char* choices) {
  return [&r, &out, choices](const YAML::Node& v, const std::string& f) -> caf::error {
    std::string s;
    if (auto e = r.read_string(v, f, s))
      return e;
    if (!parse(s, out))
      return r.error_at(v, f, std::string{"expected "} + choices + ", got '" + s + "'");
    return caf::none;
  };
}

caf::error read_conductor(yaml_reader& r, const YAML::Node& n, conductor_config& c) {
  auto ms = [&](uint32_t& out) {
    return [&r, &out](auto& v, auto& f) { return r.read_uint(v, f, out, 1, u32_max); };
  };
  return r.visit(
      n, "conductor",
      {{"heartbeat_timeout_ms", ms(c.heartbeat_timeout_ms)},
       {"policy", named(r, c.policy,
                        "random, round_robin, least_loaded, local_cache_aware, "
                        "global_cache_aware or block_cost")},
       {"admission", named(r, c.admission, "none, current_load or predicted_load")},
       {"kvcache_balancing_threshold",
        [&](auto& v, auto& f) { return r.read_double(v, f, c.kvcache_balancing_threshold); }},
       {"decode_tbt_slack",
        [&](auto& v, auto& f) { return r.read_double(v, f, c.decode_tbt_slack); }},
       {"ssd_index", [&](auto& v, auto& f) { return r.read_bool(v, f, c.ssd_index); }},
       {"slo",
        [&](auto& v, auto&) {
          return r.visit(v, "conductor.slo",
                         {{"ttft_ms", ms(c.slo_ttft_ms)}, {"tbt_ms", ms(c.slo_tbt_ms)}});
        }},
       {"seed", [&](auto& v, auto& f) { return r.read_uint(v, f, c.seed, 0, UINT64_MAX); }},
       {"profile", [&](auto& v, auto& f) { return r.read_string(v, f, c.profile); }}});
}

caf::error read_pool(yaml_reader& r, const YAML::Node& n, pool_config& p) {
  auto u32 = [&](uint32_t& out, uint64_t min, uint64_t max) {
    return [&r, &out, min, max](auto& v, auto& f) { return r.read_uint(v, f, out, min, max); };
  };
  return r.visit(
      n, "pool",
      {{"replicas", u32(p.replicas, 1, 8)},
       {"placement",
        [&](auto& v, auto& f) -> caf::error {
          std::string s;
          if (auto e = r.read_string(v, f, s))
            return e;
          if (!parse(s, p.placement))
            return r.error_at(v, f, "expected local_first, most_free or random, got '" + s + "'");
          return caf::none;
        }},
       {"eviction",
        [&](auto& v, auto& f) -> caf::error {
          std::string s;
          if (auto e = r.read_string(v, f, s))
            return e;
          if (!storage::parse(s, p.eviction))
            return r.error_at(v, f, "expected lru, lfu or length_aware, got '" + s + "'");
          return caf::none;
        }},
       {"high_watermark", [&](auto& v, auto& f) { return r.read_double(v, f, p.high_watermark); }},
       {"evict_fraction", [&](auto& v, auto& f) { return r.read_double(v, f, p.evict_fraction); }},
       {"promotion_reserve",
        [&](auto& v, auto& f) { return r.read_double(v, f, p.promotion_reserve); }},
       {"lease_ttl_ms", u32(p.lease_ttl_ms, 1, u32_max)},
       {"put_timeout_ms", u32(p.put_timeout_ms, 1, u32_max)},
       {"node_timeout_ms", u32(p.node_timeout_ms, 1, u32_max)},
       {"sweep_ms", u32(p.sweep_ms, 1, u32_max)},
       {"copy_pulled", [&](auto& v, auto& f) { return r.read_bool(v, f, p.copy_pulled); }}});
}

caf::error read_codec(yaml_reader& r, const YAML::Node& n, gpu::block_codec_options& o) {
  auto u32 = [&](uint32_t& out, uint64_t min, uint64_t max) {
    return [&r, &out, min, max](auto& v, auto& f) { return r.read_uint(v, f, out, min, max); };
  };
  return r.visit(
      n, "codec",
      {{"group_tokens", u32(o.group_tokens, 1, 4096)},
       {"sink_tokens", u32(o.sink_tokens, 0, 4096)},
       {"calibration_prompts", u32(o.calibration_prompts, 1, gpu::calibration_prompts_max)},
       {"calibration_prompt_tokens",
        u32(o.calibration_prompt_tokens, 2, gpu::model_context_tokens_max)},
       {"calibration_seed",
        [&](auto& v, auto& f) { return r.read_uint(v, f, o.calibration_seed, 0, UINT64_MAX); }},
       {"handoff", [&](auto& v, auto& f) { return r.read_bool(v, f, o.handoff); }}});
}

caf::error read_coupled(yaml_reader& r, const YAML::Node& n, coupled_config& c) {
  return r.visit(
      n, "coupled",
      {{"kv_tokens",
        [&](auto& v, auto& f) { return r.read_uint(v, f, c.kv_tokens, 1, uint64_t{1} << 40); }},
       {"batch_max", [&](auto& v, auto& f) { return r.read_uint(v, f, c.batch_max, 1, 4096); }},
       {"queue_jobs_max",
        [&](auto& v, auto& f) { return r.read_uint(v, f, c.queue_jobs_max, 1, 65536); }},
       {"chunked_prefill", [&](auto& v, auto& f) { return r.read_bool(v, f, c.chunked_prefill); }},
       {"token_budget",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, c.token_budget, 0, gpu::model_context_tokens_max);
        }},
       {"prefix_caching", [&](auto& v, auto& f) { return r.read_bool(v, f, c.prefix_caching); }}});
}

caf::error read_prefill(yaml_reader& r, const YAML::Node& n, prefill_config& p) {
  return r.visit(
      n, "prefill",
      {{"chunk_tokens",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, p.chunk_tokens, 1, gpu::model_context_tokens_max);
        }},
       {"queue_jobs_max",
        [&](auto& v, auto& f) { return r.read_uint(v, f, p.queue_jobs_max, 1, 65536); }},
       {"stream_min_tokens",
        [&](auto& v, auto& f) {
          // Any count: one above every prompt (4294967295) streams none.
          return r.read_uint(v, f, p.stream_min_tokens, 0, std::numeric_limits<uint32_t>::max());
        }},
       {"stream_layers",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, p.stream_layers, 1, gpu::model_layers_max);
        }},
       {"overlap_store", [&](auto& v, auto& f) { return r.read_bool(v, f, p.overlap_store); }},
       {"group_instances",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, p.group_instances, 1, gpu::model_layers_max);
        }},
       {"load_batch_bytes_max", [&](auto& v, auto& f) {
          return r.read_uint(v, f, p.load_batch_bytes_max, 1, prefill_load_batch_bytes_limit);
        }}});
}

caf::error read_decode(yaml_reader& r, const YAML::Node& n, decode_config& d) {
  return r.visit(
      n, "decode",
      {{"kv_mib", [&](auto& v, auto& f) { return r.read_size(v, f, d.kv_bytes, 20, 1, 1u << 20); }},
       {"kv_tokens",
        [&](auto& v, auto& f) { return r.read_uint(v, f, d.kv_tokens, 1, uint64_t{1} << 40); }},
       {"batch_max", [&](auto& v, auto& f) { return r.read_uint(v, f, d.batch_max, 1, 4096); }},
       {"request_tokens_max", [&](auto& v, auto& f) {
          return r.read_uint(v, f, d.request_tokens_max, 2, gpu::model_context_tokens_max);
        }}});
}

caf::error read_store(yaml_reader& r, const YAML::Node& n, store_config& s) {
  return r.visit(
      n, "store",
      {{"db_path", [&](auto& v, auto& f) { return r.read_string(v, f, s.db_path); }},
       {"sync_commits", [&](auto& v, auto& f) { return r.read_bool(v, f, s.sync_commits); }},
       {"ssd_dir", [&](auto& v, auto& f) { return r.read_string(v, f, s.ssd_dir); }}});
}

caf::error read_codec_kind(yaml_reader& r, const YAML::Node& n, const std::string& field,
                           gpu::block_codec_options& c) {
  std::string s;
  if (auto e = r.read_string(n, field, s))
    return e;
  auto kind = storage::codec::parse_codec_kind(s);
  if (!kind)
    return r.error_at(n, field,
                      "expected none, int8, kivi2, kivi4, kvquant3 or kvquant4, got '" + s + "'");
  c.kind = *kind;
  return caf::none;
}

caf::error read_sections(yaml_reader& r, const YAML::Node& root, cluster_config& c,
                         given_keys& model_keys, engine_keys& engine) {
  return r.visit(
      root, "",
      {{"model", [&](auto& v, auto&) { return read_model(r, v, c.model, model_keys); }},
       {"engine", [&](auto& v, auto&) { return read_engine(r, v, c.engine, engine); }},
       {"nodes", [&](auto& v, auto&) { return read_nodes(r, v, c.nodes); }},
       {"pool", [&](auto& v, auto&) { return read_pool(r, v, c.pool); }},
       {"prefill", [&](auto& v, auto&) { return read_prefill(r, v, c.prefill); }},
       {"decode", [&](auto& v, auto&) { return read_decode(r, v, c.decode); }},
       {"coupled", [&](auto& v, auto&) { return read_coupled(r, v, c.coupled); }},
       {"conductor", [&](auto& v, auto&) { return read_conductor(r, v, c.conductor); }},
       {"store", [&](auto& v, auto&) { return read_store(r, v, c.store); }},
       {"transfer", [&](auto& v, auto&) { return read_transfer(r, v, c.transfer); }},
       {"kv_codec", [&](auto& v, auto& f) { return read_codec_kind(r, v, f, c.codec); }},
       {"codec", [&](auto& v, auto&) { return read_codec(r, v, c.codec); }},
       {"trace_block_tokens",
        [&](auto& v, auto& f) { return r.read_uint(v, f, c.trace_block_tokens, 0, 4096); }},
       {"launcher", [&](auto& v, auto& f) { return r.read_string(v, f, c.launcher); }},
       {"join_timeout_ms",
        [&](auto& v, auto& f) { return r.read_uint(v, f, c.join_timeout_ms, 1, u32_max); }},
       {"rejoin_interval_ms",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, c.rejoin_interval_ms, 0, connection_timeout_ms_max);
        }},
       {"rejoin_wait_ms",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, c.rejoin_wait_ms, 0, connection_timeout_ms_max);
        }},
       {"heartbeat_interval_ms",
        [&](auto& v, auto& f) { return r.read_uint(v, f, c.heartbeat_interval_ms, 1, u32_max); }},
       {"connection_heartbeat_ms",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, c.connection_heartbeat_ms, 0, connection_timeout_ms_max);
        }},
       {"connection_timeout_ms",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, c.connection_timeout_ms, 1, connection_timeout_ms_max);
        }},
       {"request_deadline_ms",
        [&](auto& v, auto& f) { return r.read_uint(v, f, c.request_deadline_ms, 1, u32_max); }},
       {"request_retries_max",
        [&](auto& v, auto& f) {
          return r.read_uint(v, f, c.request_retries_max, 0, request_retries_limit);
        }},
       {"simulated_time", [&](auto& v, auto& f) { return r.read_bool(v, f, c.simulated_time); }},
       {"own_threads", [&](auto& v, auto& f) { return r.read_bool(v, f, c.own_threads); }},
       {"access_key_seed",
        [&](auto& v, auto& f) { return r.read_uint(v, f, c.access_key_seed, 0, UINT64_MAX); }}});
}

// A modeled engine: its profile loaded, the model's shape taken from it where the file gives
// none (a shape the file gives must agree: validate checks), its timing modeled.
caf::error resolve_engine(cluster_config& c, const given_keys& model_keys,
                          const engine_keys& engine, const std::string& base_dir) {
  auto& e = c.engine;
  if (engine.device && e.kind != gpu::engine_kind::cuda)
    return make_error(errc::bad_config,
                      "engine.device: only the cuda engine (engine.kind: cuda) runs on a device");
  if (e.kind != gpu::engine_kind::modeled) {
    if (!e.profile_name.empty())
      return make_error(errc::bad_config,
                        "engine.profile: only the modeled engine (engine.kind: modeled) has one");
    return caf::none;
  }
  if (!engine.timing)
    e.timing = gpu::timing_mode::modeled;
  if (e.profile_name.empty())
    return make_error(errc::bad_config,
                      "engine.profile: the modeled engine needs a profile (a built-in name such "
                      "as llama3-70b-8xa800, or a file)");
  auto profile = load_profile(e.profile_name, base_dir);
  if (!profile)
    return std::move(profile.error());
  e.profile = *profile;
  const auto shaped = gpu::model_of(**profile, c.model.block_tokens, c.model.context_tokens_max);
  using field = uint32_t gpu::model_config::*;
  const std::array<std::pair<const char*, field>, 7> shape = {{
      {"layers", &gpu::model_config::layers},
      {"d_model", &gpu::model_config::d_model},
      {"heads", &gpu::model_config::heads},
      {"kv_heads", &gpu::model_config::kv_heads},
      {"ffn", &gpu::model_config::ffn},
      {"vocab", &gpu::model_config::vocab},
      {"kv_element_bytes", &gpu::model_config::kv_element_bytes},
  }};
  for (const auto& [key, member] : shape) {
    auto given = model_keys.find(key);
    if (given == model_keys.end())
      c.model.*member = shaped.*member;
    else if (c.model.*member != shaped.*member)
      return make_error(errc::bad_config, std::to_string(given->second) + ": model." + key + " (" +
                                              std::to_string(c.model.*member) +
                                              ") differs from profile " + (*profile)->name + "'s " +
                                              std::to_string(shaped.*member));
  }
  return caf::none;
}

} // namespace

caf::expected<cluster_config> parse_cluster_config(const std::string& yaml_text,
                                                   const std::string& source_name,
                                                   const std::string& base_dir) {
  auto parsed = load_yaml(yaml_text, source_name);
  if (!parsed)
    return std::move(parsed.error());
  const YAML::Node root = std::move(*parsed);
  cluster_config cfg;
  if (root.IsNull())
    return cfg;
  yaml_reader reader{source_name};
  given_keys model_keys;
  engine_keys engine;
  try {
    if (auto err = read_sections(reader, root, cfg, model_keys, engine))
      return err;
  } catch (const YAML::Exception& ex) {
    return make_error(errc::bad_config,
                      source_name + ":" + std::to_string(ex.mark.line + 1) + ": " + ex.msg);
  }
  if (auto err = resolve_engine(cfg, model_keys, engine, base_dir)) {
    // A mismatch names its line ("12: model.layers ..."); the rest name their field.
    auto text = describe(err);
    const auto body = text.substr(text.find(": ") + 2);
    const bool has_line = !body.empty() && std::isdigit(static_cast<unsigned char>(body[0]));
    return make_error(errc::bad_config, source_name + (has_line ? ":" : ": ") + body);
  }
  if (auto err = validate(cfg))
    return make_error(errc::bad_config, source_name + ": " + describe(err));
  return cfg;
}

caf::expected<cluster_config> load_cluster_config(const std::string& path) {
  auto text = read_config_text(path, "cluster config");
  if (!text)
    return std::move(text.error());
  return parse_cluster_config(*text, path, std::filesystem::path{path}.parent_path().string());
}

} // namespace crescent
