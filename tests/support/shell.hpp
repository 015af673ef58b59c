// Runs a shell command line from a test and keeps what it printed on its standard output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace crescent::testing {

struct shell_result {
  int status = -1; // the exit status; -1 when it did not start or did not exit
  std::string output;
};

/// Runs `command` with /bin/sh to its end (add " 2>&1" to keep its stderr too).
inline shell_result run_shell(const std::string& command) {
  shell_result r;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr)
    return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;)
    r.output.append(buf.data(), n);
  const int raw = pclose(p);
  r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

} // namespace crescent::testing
