#include "storage/ssd_tier.hpp"

#include "messages/errors.hpp"
#include "storage/checksum.hpp"
#include "storage/ssd_io.hpp"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace crescent::storage {

struct ssd_tier::io {
  std::unique_ptr<file_io> file;
};

namespace {

constexpr uint8_t record_version = 1;

// 'k' and the key's 16 big-endian bytes.
std::string index_key(const block_key& key) {
  std::string out(17, '\0');
  out[0] = 'k';
  store_be(key, out.data() + 1);
  return out;
}

// version, offset, size, checksum: fixed width, little-endian.
std::string encode(const ssd_block& b) {
  std::string out(25, '\0');
  out[0] = static_cast<char>(record_version);
  auto put = [&](size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i)
      out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(1, b.offset);
  put(9, b.size_bytes);
  put(17, b.checksum);
  return out;
}

bool decode(std::string_view key, std::string_view value, ssd_block& out) {
  if (key.size() != 17 || key[0] != 'k' || value.size() != 25 ||
      static_cast<uint8_t>(value[0]) != record_version)
    return false;
  auto get = [](std::string_view s, size_t at, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
    return v;
  };
  out.key = load_be(key.data() + 1);
  out.offset = get(value, 1, 8);
  out.size_bytes = get(value, 9, 8);
  out.checksum = get(value, 17, 8);
  return true;
}

caf::error db_error(const std::string& what, const rocksdb::Status& s) {
  return make_error(s.IsNoSpace() ? errc::no_space : errc::io_error, what + ": " + s.ToString());
}

} // namespace

ssd_tier::ssd_tier(const ssd_options& options)
    : options_(options), io_(std::make_unique<io>()),
      space_(options.capacity_bytes, options.unit_bytes, options.blocks_max * 2 + 1) {}

ssd_tier::~ssd_tier() {
  if (fd_ >= 0)
    close(fd_);
}

caf::expected<std::unique_ptr<ssd_tier>> ssd_tier::open(const ssd_options& options) {
  if (options.directory.empty() || options.capacity_bytes == 0 || options.blocks_max == 0 ||
      options.unit_bytes == 0 || (options.unit_bytes & (options.unit_bytes - 1)) != 0)
    return make_error(errc::invalid_argument,
                      "SSD tier needs a directory, a capacity, a block limit and a power-of-two "
                      "unit");
  std::error_code ec;
  std::filesystem::create_directories(options.directory, ec);
  if (ec)
    return make_error(errc::io_error, "cannot create " + options.directory + ": " + ec.message());
  std::unique_ptr<ssd_tier> t{new ssd_tier(options)};
  const std::string data = options.directory + "/blocks.data";
  t->fd_ = ::open(data.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (t->fd_ < 0)
    return make_error(errc::io_error, "cannot open " + data + ": " + std::strerror(errno));
  t->io_->file = file_io::make(t->fd_, options.use_io_uring);
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(db_options, options.directory + "/index", &raw);
  if (!s.ok())
    return db_error("cannot open the SSD index", s);
  t->index_.reset(raw);
  if (auto err = t->load_index())
    return err;
  return t;
}

caf::error ssd_tier::load_index() {
  std::vector<ssd_block> found;
  std::unique_ptr<rocksdb::Iterator> it{index_->NewIterator(rocksdb::ReadOptions{})};
  for (it->Seek("k"); it->Valid() && it->key().starts_with("k"); it->Next()) {
    ssd_block b;
    if (it->key().size() == 9)
      return make_error(errc::io_error,
                        "SSD index written with 64-bit block keys (before 128-bit keys): its "
                        "blocks cannot be named; remove the tier's directory to start it empty");
    if (!decode({it->key().data(), it->key().size()}, {it->value().data(), it->value().size()}, b))
      return make_error(errc::io_error, "SSD index record is corrupt");
    found.push_back(b);
  }
  if (!it->status().ok())
    return db_error("cannot read the SSD index", it->status());
  std::sort(found.begin(), found.end(),
            [](const ssd_block& a, const ssd_block& b) { return a.offset < b.offset; });
  std::vector<std::pair<uint64_t, uint64_t>> used;
  for (const auto& b : found)
    used.emplace_back(b.offset, b.size_bytes);
  auto ranges = space_.restore(used);
  if (!ranges)
    return make_error(errc::io_error, "SSD index describes overlapping or out-of-range blocks "
                                      "(was the tier reopened with a smaller capacity?)");
  for (size_t i = 0; i < found.size(); ++i)
    blocks_.emplace(found[i].key, placed{found[i], (*ranges)[i]});
  return caf::none;
}

caf::error ssd_tier::put(block_key key, std::span<const std::byte> bytes, uint64_t checksum) {
  if (blocks_.count(key) != 0)
    return make_error(errc::already_exists, "block " + to_string(key) + " is on SSD");
  if (bytes.empty())
    return make_error(errc::invalid_argument, "an SSD block cannot be empty");
  if (blocks_.size() >= options_.blocks_max)
    return make_error(errc::no_space, "the SSD tier holds its maximum number of blocks");
  auto where = space_.allocate(bytes.size());
  if (!where)
    return make_error(errc::no_space, "the SSD tier is full");
  auto err = io_->file->write_at(where->offset, bytes);
  if (!err && options_.sync_writes && fdatasync(fd_) != 0)
    err = make_error(errno == ENOSPC ? errc::no_space : errc::io_error,
                     std::string{"SSD sync: "} + std::strerror(errno));
  ssd_block b{key, where->offset, bytes.size(), checksum};
  if (!err) {
    rocksdb::WriteOptions w;
    w.sync = options_.sync_writes;
    if (auto s = index_->Put(w, index_key(key), encode(b)); !s.ok())
      err = db_error("cannot record the SSD block", s);
  }
  if (err) {
    space_.free(*where);
    return err;
  }
  blocks_.emplace(key, placed{b, *where});
  return caf::none;
}

caf::error ssd_tier::get(block_key key, std::span<std::byte> out) {
  auto i = blocks_.find(key);
  if (i == blocks_.end())
    return make_error(errc::not_found, "block " + to_string(key) + " is not on SSD");
  const auto& b = i->second.block;
  if (out.size() != b.size_bytes)
    return make_error(errc::invalid_argument,
                      "the SSD block has " + std::to_string(b.size_bytes) + " bytes");
  if (auto err = io_->file->read_at(b.offset, out))
    return err;
  if (block_checksum(out) != b.checksum)
    return make_error(errc::checksum_mismatch,
                      "SSD block " + to_string(key) + " does not match its checksum");
  return caf::none;
}

caf::error ssd_tier::remove(block_key key) {
  auto i = blocks_.find(key);
  if (i == blocks_.end())
    return caf::none;
  if (auto s = index_->Delete(rocksdb::WriteOptions{}, index_key(key)); !s.ok())
    return db_error("cannot forget the SSD block", s);
  space_.free(i->second.where);
  blocks_.erase(i);
  return caf::none;
}

std::optional<ssd_block> ssd_tier::find(block_key key) const {
  auto i = blocks_.find(key);
  if (i == blocks_.end())
    return std::nullopt;
  return i->second.block;
}

std::vector<ssd_block> ssd_tier::blocks() const {
  std::vector<ssd_block> out;
  out.reserve(blocks_.size());
  for (const auto& [key, p] : blocks_)
    out.push_back(p.block);
  return out;
}

const char* ssd_tier::io_engine() const {
  return io_->file->name();
}

} // namespace crescent::storage
