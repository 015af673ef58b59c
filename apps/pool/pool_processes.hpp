// The KV pool as separate processes: `crescent pool-master` runs the store master and publishes
// it on a TCP port; `crescent pool-node` runs one node's block owner (DRAM tier, optional SSD
// tier, its own transfer engine) and joins a master, rejoining it whenever it comes back after a
// restart. Used by the multi-process pool tests and the store benchmark; the same actors run in
// the one-process cluster.
//
// Each prints one line when ready, then serves until its standard input closes or it is killed:
//   crescent-pool-master port=<p> pid=<pid>
//   crescent-pool-node node=<n> pid=<pid>
#pragma once

#include "storage/eviction.hpp"

#include <cstdint>
#include <string>

namespace crescent::pool {

struct master_process_options {
  uint32_t nodes = 3;
  std::string db_path; // RocksDB directory of the block metadata
  uint16_t port = 0;   // 0: any free port
  bool sync_commits = true;
  uint32_t put_timeout_ms = 30000;
  uint32_t lease_ttl_ms = 5000;
  uint32_t node_timeout_ms = 5000;
  uint32_t ssd_grace_ms = 600000; // a lost node's SSD replicas wait this long for it
};

struct node_process_options {
  uint32_t node = 0;
  std::string master_host = "127.0.0.1";
  uint16_t master_port = 0;
  uint64_t dram_mib = 64;
  uint64_t ssd_mib = 0;
  std::string ssd_dir;
  storage::eviction_policy policy = storage::eviction_policy::lru;
  bool shm = true;
  // RLIMIT_FSIZE for the whole process, SIGXFSZ ignored: writes past it fail with EFBIG, which
  // the SSD tier reports as a full disk. 0: no limit.
  uint64_t file_size_limit_bytes = 0;
};

int run_master_process(const master_process_options& opt);
int run_node_process(const node_process_options& opt);

} // namespace crescent::pool
