#include "actors/cluster/profile_yaml.hpp"

#include "actors/cluster/yaml_reader.hpp"
#include "messages/errors.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace crescent {

namespace detail {
const std::vector<std::pair<std::string, std::string>>& builtin_profiles();
} // namespace detail

namespace {

using gpu::modeled_profile;

caf::error read_model(yaml_reader& r, const YAML::Node& n, modeled_profile& p) {
  auto u32 = [&](uint32_t& out, uint64_t max) {
    return [&r, &out, max](auto& v, auto& f) { return r.read_uint(v, f, out, 1, max); };
  };
  auto real = [&](double& out) {
    return [&r, &out](auto& v, auto& f) { return r.read_double(v, f, out); };
  };
  return r.visit(n, "model",
                 {{"layers", u32(p.layers, gpu::model_layers_max)},
                  {"d_model", u32(p.d_model, gpu::model_d_model_max)},
                  {"heads", u32(p.heads, 1024)},
                  {"kv_heads", u32(p.kv_heads, 1024)},
                  {"ffn", u32(p.ffn, gpu::model_ffn_max)},
                  {"vocab", u32(p.vocab, gpu::model_vocab_max)},
                  {"kv_element_bytes", u32(p.kv_element_bytes, 4)},
                  {"parameters", real(p.parameters)},
                  {"weight_element_bytes", real(p.weight_element_bytes)}});
}

// A list of at most gpu::warmup_points_max numbers.
caf::error read_points(yaml_reader& r, const YAML::Node& n, const std::string& field,
                       std::vector<double>& out) {
  if (!n.IsSequence())
    return r.error_at(n, field, "expected a list of numbers");
  if (n.size() > gpu::warmup_points_max)
    return r.error_at(n, field, "at most " + std::to_string(gpu::warmup_points_max) + " points");
  out.clear();
  for (const auto& x : n) {
    double v = 0;
    if (auto err = r.read_double(x, field, v))
      return err;
    out.push_back(v);
  }
  return {};
}

caf::error read_warmup(yaml_reader& r, const YAML::Node& n, modeled_profile& p) {
  auto points = [&](std::vector<double>& out) {
    return [&r, &out](auto& v, auto& f) { return read_points(r, v, f, out); };
  };
  return r.visit(n, "warmup",
                 {{"idle_ms", points(p.warmup_idle_ms)},
                  {"prefill_extra_ns", points(p.prefill_warmup_ns)},
                  {"decode_extra_ns", points(p.decode_warmup_ns)}});
}

caf::error read_sections(yaml_reader& r, const YAML::Node& root, modeled_profile& p) {
  auto real = [&](double& out) {
    return [&r, &out](auto& v, auto& f) { return r.read_double(v, f, out); };
  };
  return r.visit(
      root, "",
      {{"name", [&](auto& v, auto& f) { return r.read_string(v, f, p.name); }},
       {"description", [&](auto& v, auto& f) { return r.read_string(v, f, p.description); }},
       {"model", [&](auto& v, auto&) { return read_model(r, v, p); }},
       {"cost",
        [&](auto& v, auto&) {
          return r.visit(v, "cost", {{"a", real(p.cost_a)}, {"b", real(p.cost_b)}});
        }},
       {"machine",
        [&](auto& v, auto&) {
          return r.visit(
              v, "machine",
              {{"gpus", [&](auto& x, auto& f) { return r.read_uint(x, f, p.gpus, 1, 1024); }},
               {"gpu_flops_per_s", real(p.gpu_flops_per_s)},
               {"gpu_hbm_bytes", real(p.gpu_hbm_bytes)},
               {"gpu_hbm_bytes_per_s", real(p.gpu_hbm_bytes_per_s)},
               {"h2d_bytes_per_s", real(p.h2d_bytes_per_s)},
               {"nic_bytes_per_s", real(p.nic_bytes_per_s)},
               {"nic_latency_s", real(p.nic_latency_s)},
               {"ssd_read_bytes_per_s", real(p.ssd_read_bytes_per_s)},
               {"ssd_write_bytes_per_s", real(p.ssd_write_bytes_per_s)},
               {"ssd_latency_s", real(p.ssd_latency_s)},
               {"shared_cores",
                [&](auto& x, auto& f) { return r.read_uint(x, f, p.shared_cores, 0, 1024); }}});
        }},
       {"fit",
        [&](auto& v, auto&) -> caf::error {
          p.fitted = true;
          for (const char* key : {"prefill_base_ns", "prefill_per_token_ns", "prefill_per_key_ns",
                                  "prefill_per_cached_token_ns", "decode_base_ns",
                                  "decode_per_sequence_ns", "decode_per_context_token_ns"})
            if (!v.IsMap() || !v[key])
              return r.error_at(v, std::string{"fit."} + key,
                                "missing: a fit gives every coefficient");
          return r.visit(v, "fit",
                         {{"prefill_base_ns", real(p.prefill_base_ns)},
                          {"prefill_per_token_ns", real(p.prefill_per_token_ns)},
                          {"prefill_per_key_ns", real(p.prefill_per_key_ns)},
                          {"prefill_per_cached_token_ns", real(p.prefill_per_cached_token_ns)},
                          {"decode_base_ns", real(p.decode_base_ns)},
                          {"decode_per_sequence_ns", real(p.decode_per_sequence_ns)},
                          {"decode_per_context_token_ns", real(p.decode_per_context_token_ns)},
                          {"prefill_fit_error", real(p.prefill_fit_error)},
                          {"decode_fit_error", real(p.decode_fit_error)}});
        }},
       {"warmup", [&](auto& v, auto&) { return read_warmup(r, v, p); }},
       {"efficiency", [&](auto& v, auto&) {
          return r.visit(v, "efficiency",
                         {{"prefill_mfu", real(p.prefill_mfu)},
                          {"decode_mfu", real(p.decode_mfu)},
                          {"hbm_efficiency", real(p.hbm_efficiency)},
                          {"prefill_call_overhead_s", real(p.prefill_call_overhead_s)},
                          {"decode_step_overhead_s", real(p.decode_step_overhead_s)}});
        }}});
}

// ":LINE" of the field a range check names ("profile.fit.decode_base_ns: ..."), found in the
// file's sections; empty where the file does not give it (a default was out of range).
std::string line_of_field(const YAML::Node& root, const std::string& error) {
  const auto at = error.find("profile.");
  if (at == std::string::npos)
    return {};
  auto field = error.substr(at + 8, error.find(':', at) - at - 8);
  const auto key = field.substr(field.rfind('.') + 1);
  try {
    for (const auto& section : root)
      if (section.second.IsMap() && section.second[key])
        return ":" + std::to_string(section.second[key].Mark().line + 1);
    if (root[key])
      return ":" + std::to_string(root[key].Mark().line + 1);
  } catch (const YAML::Exception&) {
  }
  return {};
}

caf::expected<std::string> read_file(const std::string& path) {
  return read_config_text(path, "profile");
}

} // namespace

caf::expected<std::shared_ptr<const modeled_profile>> parse_profile(const std::string& yaml_text,
                                                                    const std::string& source) {
  auto parsed = load_yaml(yaml_text, source);
  if (!parsed)
    return std::move(parsed.error());
  const YAML::Node root = std::move(*parsed);
  auto p = std::make_shared<modeled_profile>();
  yaml_reader reader{source};
  try {
    if (auto err = read_sections(reader, root, *p))
      return err;
  } catch (const YAML::Exception& ex) {
    return make_error(errc::bad_config,
                      source + ":" + std::to_string(ex.mark.line + 1) + ": " + ex.msg);
  }
  if (auto err = gpu::validate(*p))
    return make_error(errc::bad_config,
                      source + line_of_field(root, describe(err)) + ": " + describe(err));
  return std::shared_ptr<const modeled_profile>{std::move(p)};
}

caf::expected<std::shared_ptr<const modeled_profile>> load_profile(const std::string& name_or_path,
                                                                   const std::string& base_dir) {
  if (auto text = builtin_profile_text(name_or_path); !text.empty())
    return parse_profile(text, "built-in profile " + name_or_path + " (data/profiles/" +
                                   name_or_path + ".yaml)");
  namespace fs = std::filesystem;
  fs::path path{name_or_path};
  if (path.is_relative() && !base_dir.empty()) {
    std::error_code ec;
    if (auto beside = fs::path{base_dir} / path; fs::exists(beside, ec))
      path = beside;
  }
  auto text = read_file(path.string());
  if (!text) {
    std::string known;
    for (const auto& n : builtin_profile_names())
      known += (known.empty() ? "" : ", ") + n;
    return make_error(errc::bad_config, "profile '" + name_or_path +
                                            "' is neither a built-in one (" + known +
                                            ") nor a readable file");
  }
  return parse_profile(*text, path.string());
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> out;
  for (const auto& [name, text] : detail::builtin_profiles())
    out.push_back(name);
  return out;
}

std::string builtin_profile_text(const std::string& name) {
  for (const auto& [n, text] : detail::builtin_profiles())
    if (n == name)
      return text;
  return {};
}

} // namespace crescent
