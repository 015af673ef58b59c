// Two processes on one host, on a real GPU (skipped with the reason elsewhere): this test
// starts itself again as a child (the cuda_ipc_child test, which does nothing unless started
// so) that registers a cudaMalloc region; the parent reads and writes it through CUDA IPC, and
// the child checks the bytes in its own GPU memory.
#include "cuda_test_util.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

extern char** environ;

namespace crescent::transport {
namespace {

using test::device_buffer;
using test::random_bytes;

constexpr const char* child_env = "CRESCENT_CUDA_IPC_CHILD"; // "<read fd>,<write fd>"
constexpr size_t region_bytes = 32u << 20;
constexpr size_t region_offset = 4097; // into the child's allocation

std::string line_of(FILE* in) {
  char buf[512] = {};
  return std::fgets(buf, sizeof(buf), in) == nullptr ? std::string{} : std::string{buf};
}

// The child: publishes its engine and region, then answers "check <seed> <at> <n>" with ok or
// bad until "quit".
TEST(cuda_ipc_child, serve) {
  const char* fds = std::getenv(child_env);
  if (fds == nullptr)
    GTEST_SKIP() << "runs only as the child of cuda_ipc.parent_reads_and_writes_child_memory";
  int rfd = -1, wfd = -1;
  ASSERT_EQ(std::sscanf(fds, "%d,%d", &rfd, &wfd), 2);
  FILE* in = fdopen(rfd, "r");
  FILE* out = fdopen(wfd, "w");
  auto engine = test::same_host_engine(1);
  ASSERT_FALSE(engine->cuda_status()) << describe(engine->cuda_status());
  device_buffer arena{region_offset + region_bytes};
  ASSERT_NE(arena.p, nullptr);
  arena.upload(region_offset, random_bytes(region_bytes, 1));
  auto h =
      engine->register_region(1, arena.p + region_offset, region_bytes, memory_location::cuda(0));
  ASSERT_TRUE(h) << describe(h.error());
  const auto info = engine->self_info();
  std::fprintf(out, "%d %d %llu %s %llu %llu %llu\n", info.pid, info.table_fd,
               static_cast<unsigned long long>(info.table_bytes), info.host_id.c_str(),
               static_cast<unsigned long long>(h->region_id),
               static_cast<unsigned long long>(h->access_key),
               static_cast<unsigned long long>(h->length));
  std::fflush(out);
  for (std::string cmd = line_of(in); cmd.rfind("check", 0) == 0; cmd = line_of(in)) {
    unsigned long long seed = 0, at = 0, n = 0;
    std::sscanf(cmd.c_str(), "check %llu %llu %llu", &seed, &at, &n);
    const bool same = arena.download(region_offset + at, n) == random_bytes(n, seed);
    std::fprintf(out, same ? "ok\n" : "bad\n");
    std::fflush(out);
  }
}

// The child process and its pipes; ending it closes them (the child then sees the end of its
// input and exits) and reaps it, whatever assertion failed first.
struct child_process {
  pid_t pid = -1;
  FILE* out = nullptr;
  FILE* in = nullptr;
  ~child_process() {
    if (out != nullptr)
      std::fclose(out);
    if (in != nullptr)
      std::fclose(in);
    if (pid > 0)
      waitpid(pid, nullptr, 0);
  }
};

TEST(cuda_ipc, parent_reads_and_writes_child_memory) {
  auto engine = test::same_host_engine(2);
  CRESCENT_SKIP_WITHOUT_CUDA(*engine);
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  // The child inherits only its own ends: it must see the end of its input once we close ours.
  fcntl(to_child[1], F_SETFD, FD_CLOEXEC);
  fcntl(from_child[0], F_SETFD, FD_CLOEXEC);
  const std::string fds = std::string{child_env} + "=" + std::to_string(to_child[0]) + "," +
                          std::to_string(from_child[1]);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e)
    env.push_back(*e);
  env.push_back(const_cast<char*>(fds.c_str()));
  env.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char filter[] = "--gtest_filter=cuda_ipc_child.serve";
  char* argv[] = {self, filter, nullptr};
  child_process child;
  child.out = fdopen(to_child[1], "w");
  child.in = fdopen(from_child[0], "r");
  const int spawned = posix_spawn(&child.pid, self, nullptr, nullptr, argv, env.data());
  close(to_child[0]);
  close(from_child[1]);
  ASSERT_EQ(spawned, 0);
  FILE* out = child.out;
  FILE* in = child.in;

  peer_info peer;
  region_handle h;
  h.node = 1;
  {
    std::istringstream hello{line_of(in)};
    hello >> peer.pid >> peer.table_fd >> peer.table_bytes >> peer.host_id >> h.region_id >>
        h.access_key >> h.length;
    ASSERT_TRUE(hello) << "the child did not publish its region";
  }
  peer.nodes = {1};
  ASSERT_FALSE(engine->add_peer(peer));
  EXPECT_EQ(engine->paths(1).front(), "cuda");

  // The child's bytes, read here; then ours, written there and checked by the child.
  std::vector<std::byte> back(region_bytes);
  ASSERT_FALSE(engine->read(h, 0, back));
  EXPECT_EQ(back, random_bytes(region_bytes, 1));
  uint64_t at = 1;
  for (uint64_t n : {1ull, 4099ull, (1ull << 20) + 3, 16ull << 20}) {
    auto src = random_bytes(n, n + 100);
    ASSERT_FALSE(engine->write(h, at, src));
    std::fprintf(out, "check %llu %llu %llu\n", static_cast<unsigned long long>(n + 100),
                 static_cast<unsigned long long>(at), static_cast<unsigned long long>(n));
    std::fflush(out);
    EXPECT_EQ(line_of(in), "ok\n") << n;
    at = at * 3 + 7;
  }
  auto bad = h;
  bad.access_key ^= 1;
  EXPECT_TRUE(is(engine->read(bad, 0, back), errc::access_denied));
  engine->remove_peer(1); // closes the IPC mapping before the child frees its memory
  std::fprintf(out, "quit\n");
  std::fflush(out);
  int status = 0;
  ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
  child.pid = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

} // namespace
} // namespace crescent::transport
