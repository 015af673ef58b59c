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
  libxxhash-dev liburing-dev libcpp-httplib-dev libssl-dev
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

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ -n "$sudo" ] && ! command -v sudo >/dev/null; then
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The official OpenAI client for tests/system/openai_client_test.cpp, at the version
# tests/clients/openai/package.json pins (from the npm registry, with Node.js: Debian's nodejs
# and npm when the machine has no node). Optional: without it that test skips with the reason.
root=$(cd "$(dirname "$0")/.." && pwd)
client="$root/tests/clients/openai"
if [ ! -d "$client/node_modules/openai" ]; then
  if ! command -v npm >/dev/null; then
    $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null 2>&1 ||
      echo "setup: could not install nodejs and npm (the OpenAI client test will skip)" >&2
  fi
  if command -v npm >/dev/null; then
    (cd "$client" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
      echo "setup: npm could not install the openai client (the OpenAI client test will skip)" >&2
  fi
fi
