// The `transfer:` section of a cluster file: how processes move KV. Values are read here with
// their types; the transfer engine's own check (transport::check_transfer_options) holds the
// limits, so that they are written down once.
#include "actors/cluster/transfer_config_yaml.hpp"

#include "transport/transfer_engine.hpp"

namespace crescent {

namespace {

// A size in KiB, stored in bytes.
auto kib(yaml_reader& r, uint64_t& bytes) {
  return [&r, &bytes](const YAML::Node& v, const std::string& f) {
    return r.read_size(v, f, bytes, 10, 1, 1u << 24);
  };
}

// A duration in milliseconds.
auto ms(yaml_reader& r, std::chrono::milliseconds& out) {
  return [&r, &out](const YAML::Node& v, const std::string& f) -> caf::error {
    uint64_t value = 0;
    if (auto err = r.read_uint(v, f, value, 0, u32_max))
      return err;
    out = std::chrono::milliseconds(value);
    return caf::none;
  };
}

template <class T>
auto number(yaml_reader& r, T& out) {
  return [&r, &out](const YAML::Node& v, const std::string& f) {
    return r.read_uint(v, f, out, 0, std::numeric_limits<T>::max());
  };
}

} // namespace

caf::error read_transfer(yaml_reader& r, const YAML::Node& n, transfer_config& t) {
  auto& o = t.engine;
  auto flag = [&r](bool& out) {
    return [&r, &out](const YAML::Node& v, const std::string& f) { return r.read_bool(v, f, out); };
  };
  auto devices = [&r](std::vector<std::string>& out) {
    return [&r, &out](const YAML::Node& v, const std::string& f) {
      return r.read_strings(v, f, out, transport::rdma_devices_max);
    };
  };
  auto err =
      r.visit(n, "transfer",
              {{"bind_host", [&](auto& v, auto& f) { return r.read_string(v, f, t.bind_host); }},
               {"shm", flag(t.shm)},
               {"rdma", flag(o.enable_rdma)},
               {"cuda", flag(o.enable_cuda)},
               {"rdma_devices", devices(o.rdma_preferred_devices)},
               {"rdma_fallback_devices", devices(o.rdma_fallback_devices)},
               {"rdma_gid_index",
                [&](auto& v, auto& f) -> caf::error {
                  int64_t index = 0;
                  if (auto e = r.read_int(v, f, index, -1, 255))
                    return e;
                  o.rdma_gid_index = static_cast<int32_t>(index);
                  return caf::none;
                }},
               {"rdma_traffic_class", number(r, o.rdma_traffic_class)},
               {"rdma_service_level", number(r, o.rdma_service_level)},
               {"rdma_qps_per_peer", number(r, o.rdma_qps_per_peer)},
               {"rdma_queue_depth", number(r, o.rdma_queue_depth)},
               {"rdma_qp_timeout", number(r, o.rdma_qp_timeout)},
               {"rdma_retry_count", number(r, o.rdma_retry_count)},
               {"tcp_connections", number(r, o.tcp_connections_per_peer)},
               {"slice_kib", kib(r, o.slice_bytes)},
               {"tcp_slice_kib", kib(r, o.tcp_slice_bytes)},
               {"copy_slice_kib", kib(r, o.copy_slice_bytes)},
               {"slice_attempts", number(r, o.slice_attempts_max)},
               {"connect_timeout_ms", ms(r, o.connect_timeout)},
               {"peer_silence_ms", ms(r, o.tcp_peer_silence_max)}});
  if (err)
    return err;
  if (auto bad = transport::check_transfer_options(o))
    return r.error_at(n, "transfer", describe(bad));
  return caf::none;
}

} // namespace crescent
