// Reading YAML config files field by field: every key must be known, every value checked, and
// every error names the file, the line and the field.
#pragma once

#include "messages/errors.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace crescent {

class yaml_reader {
 public:
  explicit yaml_reader(std::string source) : source_(std::move(source)) {}

  caf::error error_at(const YAML::Node& node, const std::string& field, const std::string& what) {
    std::string where = source_;
    if (node.IsDefined() && node.Mark().line >= 0)
      where += ":" + std::to_string(node.Mark().line + 1);
    return make_error(errc::bad_config, where + ": " + field + ": " + what);
  }

  template <class T>
  caf::error read_uint(const YAML::Node& node, const std::string& field, T& out, uint64_t min,
                       uint64_t max) {
    uint64_t value = 0;
    try {
      if (!node.IsScalar())
        return error_at(node, field, "expected a number");
      auto text = node.Scalar();
      if (text.empty() || text[0] == '-')
        return error_at(node, field, "expected a non-negative integer, got '" + text + "'");
      value = node.as<uint64_t>();
    } catch (const YAML::Exception&) {
      return error_at(node, field, "expected an integer, got '" + node.Scalar() + "'");
    }
    if (auto err = in_range(node, field, value, min, max))
      return err;
    out = static_cast<T>(value);
    return caf::none;
  }

  /// A size in units of 2^shift bytes (10: KiB, 20: MiB), `min` to `max` of them, in bytes.
  caf::error read_size(const YAML::Node& node, const std::string& field, uint64_t& bytes,
                       unsigned shift, uint64_t min, uint64_t max) {
    uint64_t units = 0;
    if (auto err = read_uint(node, field, units, min, max))
      return err;
    bytes = units << shift;
    return caf::none;
  }

  caf::error read_double(const YAML::Node& node, const std::string& field, double& out) {
    try {
      out = node.as<double>();
      return caf::none;
    } catch (const YAML::Exception&) {
      return error_at(node, field, "expected a number");
    }
  }

  caf::error read_bool(const YAML::Node& node, const std::string& field, bool& out) {
    try {
      out = node.as<bool>();
      return caf::none;
    } catch (const YAML::Exception&) {
      return error_at(node, field, "expected true or false");
    }
  }

  caf::error read_string(const YAML::Node& node, const std::string& field, std::string& out) {
    if (!node.IsScalar())
      return error_at(node, field, "expected a string");
    out = node.Scalar();
    return caf::none;
  }

  caf::error read_int(const YAML::Node& node, const std::string& field, int64_t& out, int64_t min,
                      int64_t max) {
    try {
      if (!node.IsScalar())
        return error_at(node, field, "expected a number");
      out = node.as<int64_t>();
    } catch (const YAML::Exception&) {
      return error_at(node, field, "expected an integer, got '" + node.Scalar() + "'");
    }
    return in_range(node, field, out, min, max);
  }

  /// A list of at most `count_max` strings.
  caf::error read_strings(const YAML::Node& node, const std::string& field,
                          std::vector<std::string>& out, size_t count_max) {
    if (!node.IsSequence())
      return error_at(node, field, "expected a list of strings");
    if (node.size() > count_max)
      return error_at(node, field, "at most " + std::to_string(count_max) + " entries");
    out.clear();
    for (size_t i = 0; i < node.size(); ++i) {
      std::string s;
      if (auto err = read_string(node[i], field + "[" + std::to_string(i) + "]", s))
        return err;
      out.push_back(std::move(s));
    }
    return caf::none;
  }

  using handler = std::function<caf::error(const YAML::Node&, const std::string&)>;

  /// Visits a mapping: each key must have a handler; the handler reads the value.
  caf::error visit(const YAML::Node& map, const std::string& prefix,
                   const std::map<std::string, handler>& handlers) {
    if (!map.IsMap())
      return error_at(map, prefix.empty() ? "(top level)" : prefix, "expected a mapping");
    for (const auto& kv : map) {
      auto key = kv.first.as<std::string>();
      auto field = prefix.empty() ? key : prefix + "." + key;
      auto h = handlers.find(key);
      if (h == handlers.end())
        return error_at(kv.first, field, "unknown field");
      if (auto err = h->second(kv.second, field))
        return err;
    }
    return caf::none;
  }

 private:
  template <class I>
  caf::error in_range(const YAML::Node& node, const std::string& field, I value, I min, I max) {
    if (value >= min && value <= max)
      return caf::none;
    return error_at(node, field,
                    std::to_string(value) + " is not in [" + std::to_string(min) + ", " +
                        std::to_string(max) + "]");
  }

  std::string source_;
};

inline constexpr uint64_t u32_max = std::numeric_limits<uint32_t>::max();

/// The whole text of a config file; the error names what it is ("cannot read fault plan p.yaml").
inline caf::expected<std::string> read_config_text(const std::string& path,
                                                   const std::string& what) {
  std::ifstream in{path};
  if (!in)
    return make_error(errc::bad_config, "cannot read " + what + " " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Parses YAML text; an error names the source and the line ("f.yaml:3: not valid YAML: ...").
inline caf::expected<YAML::Node> load_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& ex) {
    return make_error(errc::bad_config, source + ":" + std::to_string(ex.mark.line + 1) +
                                            ": not valid YAML: " + ex.msg);
  }
}

} // namespace crescent
