#include "apps/bench/child_process.hpp"

#include "messages/errors.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

extern char** environ;

namespace crescent::bench {

std::string self_executable() {
  char path[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string{};
}

caf::expected<child_process> child_process::spawn(const std::string& program,
                                                  const std::vector<std::string>& args,
                                                  const std::string& stderr_path) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    return make_error(errc::io_error, std::string{"pipe: "} + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (!stderr_path.empty())
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  // The child starts with no signal blocked, whatever this process blocks (crescent up keeps
  // SIGINT and SIGTERM for a watcher thread; its nodes must still exit on them).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  child_process c;
  int rc = posix_spawn(&c.pid_, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  c.stdin_fd_ = in[1];
  c.stdout_fd_ = out[0];
  if (rc != 0) {
    c.pid_ = -1;
    return make_error(errc::io_error, "cannot start " + program + ": " + std::strerror(rc));
  }
  return c;
}

child_process::child_process(child_process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), stdin_fd_(std::exchange(other.stdin_fd_, -1)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)), buffered_(std::move(other.buffered_)) {}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    child_process old{std::move(*this)}; // ends here, as the child this held
    pid_ = std::exchange(other.pid_, -1);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    buffered_ = std::move(other.buffered_);
  }
  return *this;
}

void child_process::close_input() {
  if (stdin_fd_ >= 0)
    close(stdin_fd_);
  stdin_fd_ = -1;
}

child_process::~child_process() {
  close_input();
  if (pid_ > 0) {
    // A few seconds to exit on its own after its input closed, then no more.
    for (int i = 0; i < 300; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      poll(nullptr, 0, 10);
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  if (stdout_fd_ >= 0)
    close(stdout_fd_);
}

void child_process::kill() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

bool child_process::signal(int sig) {
  return pid_ > 0 && ::kill(pid_, sig) == 0;
}

caf::expected<int> child_process::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (done < 0 || std::chrono::steady_clock::now() >= deadline)
      break;
    poll(nullptr, 0, 10);
  }
  return make_error(errc::timeout,
                    pid_ > 0 ? "the child is still running" : "no child to wait for");
}

bool child_process::running() {
  if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == pid_)
    pid_ = -1;
  return pid_ > 0;
}

caf::expected<std::string> child_process::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = buffered_.find('\n'); nl != std::string::npos) {
      auto line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return make_error(errc::timeout, "the child printed no line in time");
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0)
      continue;
    char buf[512];
    ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0)
      return make_error(errc::io_error, "the child closed its output");
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

} // namespace crescent::bench
