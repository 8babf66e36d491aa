# `cmake --install build --prefix P`: headers under P/include/xgrad (on the targets' include path, so downstream
# code writes #include "autograd/tensor.h" as xgrad's own does), shared libraries in P/lib, the xgrad executable in
# P/bin, and P/lib/cmake/xgrad/xgrad-config.cmake for find_package(xgrad CONFIG REQUIRED).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(XGRAD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/xgrad)

# Each library is exported as xgrad::<name>; the same names are aliases in this tree, so a project that adds xgrad
# with add_subdirectory links the same targets as one that uses find_package.
set(xgrad_exported_libraries autograd random blas platform nn data common train report cli)
foreach(name IN LISTS xgrad_exported_libraries)
  set_target_properties(xgrad_${name} PROPERTIES EXPORT_NAME ${name})
  if(NOT TARGET xgrad::${name})
    add_library(xgrad::${name} ALIAS xgrad_${name})
  endif()
  list(APPEND xgrad_exported_targets xgrad_${name})
endforeach()

install(TARGETS ${xgrad_exported_targets} xgrad
  EXPORT xgrad-targets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

# Every header keeps its folder: P/include/xgrad/autograd/tensor.h, P/include/xgrad/cli/main.h, ... (listed
# file by file: install(DIRECTORY) would also create the folders that hold only sources, such as nn/scaling/).
file(GLOB_RECURSE xgrad_headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS
  autograd/*.h cli/*.h common/*.h data/*.h nn/*.h platform/*.h report/*.h train/*.h)
foreach(header IN LISTS xgrad_headers)
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad/${folder})
endforeach()

install(EXPORT xgrad-targets NAMESPACE xgrad:: DESTINATION ${XGRAD_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/xgrad-config.cmake.in ${PROJECT_BINARY_DIR}/xgrad-config.cmake
  INSTALL_DESTINATION ${XGRAD_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the interface, so only the same major.minor satisfies a request.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/xgrad-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/xgrad-config.cmake ${PROJECT_BINARY_DIR}/xgrad-config-version.cmake
  DESTINATION ${XGRAD_INSTALL_CMAKEDIR})
