// A temporary directory of one test, removed with it (also when an assertion ends the test).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace crescent::testing {

struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("crescent-" + name + "-" + std::to_string(getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  /// Writes `text` to `file` in it; the file's path.
  std::string write(const std::string& file, const std::string& text) const {
    std::ofstream{path / file} << text;
    return (path / file).string();
  }
};

} // namespace crescent::testing
