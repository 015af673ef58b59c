# Debian's libcaf-dev (CAF 0.17) ships neither a CMake config nor a pkg-config file, so this
# module finds the headers and the two libraries Crescent uses and defines imported targets:
#   CAF::core  (libcaf_core)   CAF::io  (libcaf_io, the middleman for distribution)
find_path(CAF_INCLUDE_DIR NAMES caf/all.hpp)
find_library(CAF_CORE_LIBRARY NAMES caf_core)
find_library(CAF_IO_LIBRARY NAMES caf_io)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY)

if(CAF_FOUND AND NOT TARGET CAF::core)
  add_library(CAF::core SHARED IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
  add_library(CAF::io SHARED IMPORTED)
  set_target_properties(CAF::io PROPERTIES
    IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
    INTERFACE_LINK_LIBRARIES CAF::core)
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY)
