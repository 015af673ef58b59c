// Names for the engine's own threads, as `top -H`, perf and gdb show them. Linux keeps 15
// characters of a name; the rest is cut.
#pragma once

#include <pthread.h>

namespace crescent::transport {

/// Names the calling thread; best effort (a name is a debugging aid, never a reason to fail).
inline void name_this_thread(const char* name) {
  char cut[16] = {};
  for (int i = 0; i < 15 && name[i] != '\0'; ++i)
    cut[i] = name[i];
  pthread_setname_np(pthread_self(), cut);
}

} // namespace crescent::transport
