// The engine's own threads carry names, as `top -H`, perf and gdb show them. Linux keeps 15
// characters of a name; the rest is cut.
#pragma once

#include <pthread.h>

#include <thread>
#include <utility>

namespace crescent::transport {

/// A thread named `name` (best effort: a name is a debugging aid, never a reason to fail) that
/// runs `body`.
template <class F>
std::thread named_thread(const char* name, F&& body) {
  return std::thread([name, body = std::forward<F>(body)]() mutable {
    char cut[16] = {};
    for (int i = 0; i < 15 && name[i] != '\0'; ++i)
      cut[i] = name[i];
    pthread_setname_np(pthread_self(), cut);
    body();
  });
}

} // namespace crescent::transport
