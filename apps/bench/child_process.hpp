// A child process with pipes to its standard input and output, for benchmarks and multi-process
// tests that start their own peers. Destroying it closes the child's standard input (a transfer
// peer exits on that), then kills it if it is still running after a grace period, and reaps it.
#pragma once

#include <caf/expected.hpp>

#include <chrono>
#include <string>
#include <sys/types.h>
#include <vector>

namespace crescent::bench {

class child_process {
 public:
  /// `stderr_path`: the child's standard error is appended to that file (empty: this process's).
  static caf::expected<child_process> spawn(const std::string& program,
                                            const std::vector<std::string>& args,
                                            const std::string& stderr_path = {});

  child_process(child_process&& other) noexcept;
  /// Ends the child this held (as the destructor does) and takes over `other`'s.
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  ~child_process();

  /// One line of the child's standard output, without the newline; waits at most `timeout`.
  caf::expected<std::string> read_line(std::chrono::milliseconds timeout);

  /// Closes the child's standard input (the processes this starts exit on that).
  void close_input();

  /// SIGKILL, now.
  void kill();

  /// Sends `sig` (SIGSTOP, SIGCONT, SIGKILL, ...) without waiting for its effect. False when the
  /// child is gone already (reaped) or the signal could not be sent.
  bool signal(int sig);

  /// Whether the child has not ended yet (one that has is reaped here).
  bool running();

  /// Waits at most `timeout` for the child to end, reaps it and returns its exit status (128 +
  /// the signal that ended it, as a shell says). Errors: still running, or reaped already.
  caf::expected<int> wait_exit(std::chrono::milliseconds timeout);

  pid_t pid() const { return pid_; }

 private:
  child_process() = default;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
};

/// The path of the running executable (to start another instance of it).
std::string self_executable();

} // namespace crescent::bench
