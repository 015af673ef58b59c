#include "messages/block_key.hpp"

#include <openssl/evp.h>

#include <array>
#include <cstdlib>
#include <memory>

namespace crescent {

std::string to_string(const block_key& key) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = digits[(key.hi >> (4 * i)) & 0xf];
    out[31 - i] = digits[(key.lo >> (4 * i)) & 0xf];
  }
  return out;
}

namespace {

struct digest_context {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
};

} // namespace

// One context per thread: a key costs three calls on it and no allocation. An OpenSSL failure
// (no memory for the context, a provider without SHA-256) leaves no key to give, and a made-up
// key would alias blocks: abort.
block_key sha256_key(std::initializer_list<std::span<const std::byte>> parts) {
  thread_local digest_context context;
  EVP_MD_CTX* ctx = context.ctx.get();
  std::array<unsigned char, 32> md{};
  unsigned int md_bytes = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1;
  for (auto part : parts)
    ok = ok && EVP_DigestUpdate(ctx, part.data(), part.size()) == 1;
  ok = ok && EVP_DigestFinal_ex(ctx, md.data(), &md_bytes) == 1 && md_bytes == md.size();
  if (!ok)
    std::abort();
  return load_be(reinterpret_cast<const char*>(md.data()));
}

} // namespace crescent
