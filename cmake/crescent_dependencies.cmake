# Every third-party library Crescent uses, found once. tools/setup.sh installs all of them.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(CAF REQUIRED)
find_package(CapnProto CONFIG REQUIRED)
find_package(RocksDB CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(CLI11 CONFIG QUIET)
# SHA-256 of block keys (messages/block_key.cpp).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(URING IMPORTED_TARGET liburing)
# `crescent serve`'s HTTP server (Debian's libcpp-httplib-dev, 0.11).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# Client libraries of the store benchmark's baselines (memcached, Redis); optional: without them
# `crescent bench store` measures the pool alone and says why.
pkg_check_modules(LIBMEMCACHED IMPORTED_TARGET libmemcached)
pkg_check_modules(HIREDIS IMPORTED_TARGET hiredis)

find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp REQUIRED)
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)

# RocksDB::rocksdb is the 32 MB static archive; the shared library links far faster.
if(TARGET RocksDB::rocksdb-shared)
  set(CRESCENT_ROCKSDB RocksDB::rocksdb-shared)
else()
  set(CRESCENT_ROCKSDB RocksDB::rocksdb)
endif()

# RDMA (rdma-core) is optional: without it the RDMA backend is not built.
set(CRESCENT_HAVE_RDMA OFF)
if(CRESCENT_WITH_RDMA)
  pkg_check_modules(IBVERBS IMPORTED_TARGET libibverbs)
  if(IBVERBS_FOUND)
    set(CRESCENT_HAVE_RDMA ON)
  endif()
endif()

# CUDA is optional: built whenever nvcc is found, for sm_90 (H100/H200). `native` would fail on
# machines without a GPU. Only the runtime is linked (never -lcuda: this environment points
# LIBRARY_PATH at the driver stubs, and a binary linked to them cannot start without a driver).
set(CRESCENT_HAVE_CUDA OFF)
if(CRESCENT_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES 90)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CRESCENT_HAVE_CUDA ON)
  endif()
endif()
message(STATUS "crescent: CUDA ${CRESCENT_HAVE_CUDA}, RDMA ${CRESCENT_HAVE_RDMA}")
