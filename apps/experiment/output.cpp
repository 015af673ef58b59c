#include "apps/experiment/output.hpp"

#include "apps/experiment/progress.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace crescent::experiment {

namespace {

json header_json(const experiment& e, const run_info& info) {
  json j;
  j["format"] = "crescent-experiment-1";
  j["experiment"] = e.name();
  j["description"] = e.description();
  j["figure"] = e.figure();
  j["command"] = info.command;
  j["commit"] = info.commit;
  j["trace"] = {{"path", info.trace_path}, {"requests", info.requests}};
  j["seed"] = info.seed;
  return j;
}

std::string dump(const json& j) {
  // Paths may hold any bytes: replace what is not UTF-8 rather than throw.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string markdown_table(const table& t) {
  std::string out;
  if (!t.caption.empty())
    out += "**" + t.caption + "**\n\n";
  auto line = [](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (const auto& c : cells)
      s += " " + c + " |";
    return s + "\n";
  };
  out += line(t.header);
  out += line(std::vector<std::string>(t.header.size(), "---"));
  for (const auto& row : t.rows)
    out += line(row);
  return out;
}

caf::error write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
  out.close();
  if (!out)
    return make_error(errc::io_error, "cannot write " + path.string());
  return caf::none;
}

// Debian's python3 first: another python3 earlier on PATH may lack matplotlib.
caf::error plot(const std::filesystem::path& json_path, const std::filesystem::path& png_path,
                const std::filesystem::path& wall_path) {
  const std::string script = std::string{CRESCENT_TOOLS_DIR} + "/plot_experiment.py";
  if (!std::filesystem::exists(script))
    return make_error(errc::not_found, "the plot script " + script + " is not there");
  for (const auto& p : {script, json_path.string(), png_path.string(), wall_path.string()})
    if (p.find('\'') != std::string::npos)
      return make_error(errc::invalid_argument, "a path with a ' cannot be plotted: " + p);
  const char* python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string cmd =
      fmt::format("{} '{}' '{}' '{}'", python, script, json_path.string(), png_path.string());
  if (!wall_path.empty())
    cmd += fmt::format(" --wall '{}'", wall_path.string());
  if (std::system(cmd.c_str()) != 0)
    return make_error(errc::io_error, "plotting failed: " + cmd);
  return caf::none;
}

} // namespace

std::string format_json(const experiment& e, const result& r, const run_info& info) {
  auto j = header_json(e, info);
  j["results"] = r.data;
  return dump(j);
}

std::string format_tables(const result& r) {
  std::string out;
  for (const auto& t : r.tables)
    out += markdown_table(t) + "\n";
  return out;
}

std::string format_markdown(const experiment& e, const result& r, const run_info& info) {
  std::string out = fmt::format("## {} ({})\n\n{}.\n\n", e.name(), e.figure(), e.description());
  out += fmt::format("Command: `{}` (Crescent {}; {} requests).\n\n", info.command, info.commit,
                     info.requests);
  out += fmt::format("![{}]({}.png)\n\n", e.name(), e.name());
  out += format_tables(r);
  for (const auto& n : r.notes)
    out += n + "\n\n";
  out += fmt::format("Wall time on the machine that ran it: {}.\n", format_duration(info.wall_s));
  return out;
}

caf::error write_outputs(const std::string& dir, const experiment& e, const result& r,
                         const run_info& info, bool plot_it) {
  const std::filesystem::path base = std::filesystem::path{dir} / std::string{e.name()};
  auto with = [&](const char* ext) { return std::filesystem::path{base.string() + ext}; };
  if (auto err = write_file(with(".json"), format_json(e, r, info)))
    return err;
  std::filesystem::path wall_path;
  if (!r.wall.empty()) {
    auto j = header_json(e, info);
    j["wall"] = r.wall;
    wall_path = with(".wall.json");
    if (auto err = write_file(wall_path, dump(j)))
      return err;
  }
  if (auto err = write_file(with(".md"), format_markdown(e, r, info)))
    return err;
  return plot_it ? plot(with(".json"), with(".png"), wall_path) : caf::none;
}

} // namespace crescent::experiment
