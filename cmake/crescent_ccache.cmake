# ccache keyed on paths relative to the source root, so a fresh clone in another directory
# still hits the cache (CCACHE_BASEDIR / CCACHE_NOHASHDIR, see BUILD_NOTES).
find_program(CRESCENT_CCACHE ccache)
if(CRESCENT_CCACHE)
  set(crescent_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}
      CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros ${CRESCENT_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${crescent_launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${crescent_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${crescent_launcher})
endif()
