#include "transport/transfer_engine.hpp"

#include "messages/errors.hpp"

#include <cstring>
#include <mutex>
#include <random>

namespace crescent::transport {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

transfer_engine::transfer_engine(uint64_t key_seed) : key_state_(key_seed) {
  if (key_state_ == 0) {
    std::random_device rd;
    key_state_ = (uint64_t{rd()} << 32) | rd();
  }
}

caf::expected<region_handle> transfer_engine::register_region(uint32_t node, std::byte* base,
                                                              uint64_t length_bytes) {
  if (base == nullptr || length_bytes == 0)
    return make_error(errc::invalid_argument, "cannot register a null or empty region");
  if (length_bytes > region_bytes_max)
    return make_error(errc::limit_exceeded,
                      "region of " + std::to_string(length_bytes) + " bytes exceeds the limit");
  std::unique_lock guard{mutex_};
  if (regions_.size() >= regions_max)
    return make_error(errc::limit_exceeded, "too many registered regions");
  const uint64_t id = next_region_id_++;
  uint64_t key = splitmix64(key_state_);
  regions_.emplace(id, region{node, base, length_bytes, key});
  return region_handle{node, id, 0, length_bytes, key};
}

caf::error transfer_engine::unregister_region(const region_handle& h) {
  std::unique_lock guard{mutex_};
  auto i = regions_.find(h.region_id);
  if (i == regions_.end())
    return make_error(errc::not_found, "unregister of unknown " + to_string(h));
  if (i->second.access_key != h.access_key)
    return make_error(errc::access_denied, "wrong access key to unregister " + to_string(h));
  regions_.erase(i);
  return caf::none;
}

caf::expected<std::byte*> transfer_engine::resolve(const region_handle& h, uint64_t offset,
                                                   uint64_t len) const {
  auto i = regions_.find(h.region_id);
  if (i == regions_.end())
    return make_error(errc::not_found, "no registered region for " + to_string(h));
  const region& r = i->second;
  if (r.access_key != h.access_key)
    return make_error(errc::access_denied, "access key does not match " + to_string(h));
  // Written so that no sum can overflow: each bound is checked against what remains.
  if (h.offset > r.length || h.length > r.length - h.offset)
    return make_error(errc::out_of_range, to_string(h) + " lies outside its region of " +
                                              std::to_string(r.length) + " bytes");
  if (offset > h.length || len > h.length - offset)
    return make_error(errc::out_of_range, "bytes [" + std::to_string(offset) + ", +" +
                                              std::to_string(len) + ") lie outside " +
                                              to_string(h));
  return r.base + h.offset + offset;
}

caf::error transfer_engine::read(const region_handle& src, uint64_t offset,
                                 std::span<std::byte> dst) {
  std::shared_lock guard{mutex_};
  auto p = resolve(src, offset, dst.size());
  if (!p) {
    ++refused_;
    return std::move(p.error());
  }
  std::memcpy(dst.data(), *p, dst.size());
  bytes_read_ += dst.size();
  ++operations_;
  return caf::none;
}

caf::error transfer_engine::write(const region_handle& dst, uint64_t offset,
                                  std::span<const std::byte> src) {
  std::shared_lock guard{mutex_};
  auto p = resolve(dst, offset, src.size());
  if (!p) {
    ++refused_;
    return std::move(p.error());
  }
  std::memcpy(*p, src.data(), src.size());
  bytes_written_ += src.size();
  ++operations_;
  return caf::none;
}

caf::error transfer_engine::copy(const region_handle& src, const region_handle& dst) {
  std::shared_lock guard{mutex_};
  auto from = resolve(src, 0, src.length);
  if (!from) {
    ++refused_;
    return std::move(from.error());
  }
  auto to = resolve(dst, 0, src.length);
  if (!to) {
    ++refused_;
    return std::move(to.error());
  }
  std::memmove(*to, *from, src.length);
  bytes_read_ += src.length;
  bytes_written_ += src.length;
  ++operations_;
  return caf::none;
}

transfer_metrics transfer_engine::metrics() const {
  return transfer_metrics{bytes_read_.load(), bytes_written_.load(), operations_.load(),
                          refused_.load()};
}

} // namespace crescent::transport
