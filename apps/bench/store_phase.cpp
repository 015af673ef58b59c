#include "apps/bench/store_phase.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <latch>
#include <mutex>
#include <random>
#include <thread>

namespace crescent::bench {

namespace {

using clock_type = std::chrono::steady_clock;

std::vector<std::byte> payload(uint64_t value_bytes) {
  std::vector<std::byte> v(value_bytes);
  std::mt19937_64 rng{value_bytes};
  for (size_t i = 0; i + 8 <= v.size(); i += 8) {
    const uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  return v;
}

// The benchmark's keys differ in their low word only: that is what the value carries.
void stamp(std::vector<std::byte>& v, block_key key) {
  std::memcpy(v.data(), &key.lo, std::min<size_t>(8, v.size()));
  if (v.size() >= 16)
    std::memcpy(v.data() + v.size() - 8, &key.lo, 8);
}

double percentile_us(std::vector<double>& us, double p) {
  if (us.empty())
    return 0;
  const size_t at =
      std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())));
  std::nth_element(us.begin(), us.begin() + static_cast<ptrdiff_t>(at), us.end());
  return us[at];
}

} // namespace

phase_result run_phase(std::vector<std::unique_ptr<kv_client>>& clients, bool put,
                       uint64_t value_bytes, uint64_t ops_per_client, uint64_t key_base,
                       uint32_t rounds) {
  const auto base = payload(value_bytes);
  std::vector<std::vector<double>> latencies(clients.size());
  std::vector<phase_result> parts(clients.size());
  std::latch ready{static_cast<ptrdiff_t>(clients.size()) + 1};
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients.size(); ++c)
    threads.emplace_back([&, c] {
      auto expected = base;
      std::vector<std::byte> got(value_bytes);
      auto& part = parts[c];
      latencies[c].reserve(ops_per_client * rounds);
      ready.arrive_and_wait();
      for (uint64_t i = 0; i < ops_per_client * rounds; ++i) {
        const block_key key{0, key_base + c * ops_per_client + i % ops_per_client};
        stamp(expected, key);
        const auto t0 = clock_type::now();
        caf::error err;
        bool hit = true;
        if (put) {
          err = clients[c]->put(key, expected);
        } else if (auto r = clients[c]->get(key, got)) {
          hit = *r;
        } else {
          err = std::move(r.error());
        }
        latencies[c].push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
        if (err) {
          if (part.errors++ == 0)
            part.first_error = describe(err);
        } else if (!hit) {
          ++part.misses;
        } else if (!put && std::memcmp(got.data(), expected.data(), value_bytes) != 0) {
          // memcmp, not vector's !=: libstdc++ compares std::byte one at a time, which took a
          // quarter of this machine's CPU at 512 KiB and narrowed every ratio toward 1.
          ++part.wrong;
        } else {
          ++part.ops;
          part.bytes += value_bytes;
        }
      }
    });
  ready.arrive_and_wait();
  const auto start = clock_type::now();
  for (auto& t : threads)
    t.join();
  phase_result total;
  total.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  std::vector<double> all;
  for (size_t c = 0; c < clients.size(); ++c) {
    total.ops += parts[c].ops;
    total.bytes += parts[c].bytes;
    total.misses += parts[c].misses;
    total.wrong += parts[c].wrong;
    total.errors += parts[c].errors;
    if (total.first_error.empty())
      total.first_error = parts[c].first_error;
    all.insert(all.end(), latencies[c].begin(), latencies[c].end());
  }
  total.p50_us = percentile_us(all, 0.50);
  total.p99_us = percentile_us(all, 0.99);
  return total;
}

} // namespace crescent::bench
