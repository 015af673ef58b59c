#!/usr/bin/env bash
# Installs every Debian package Crescent's build and tests need. Idempotent: packages already
# present are not touched, and apt-get runs only when something is missing. Works as root on a
# fresh Debian bookworm machine (uses sudo otherwise, when available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libcaf-dev capnproto libcapnp-dev librocksdb-dev
  libibverbs-dev librdmacm-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libxxhash-dev liburing-dev libcpp-httplib-dev
  memcached redis-server libmemcached-dev libhiredis-dev
  clang-format
  prometheus chromium
  iproute2 nftables
  python3 python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
