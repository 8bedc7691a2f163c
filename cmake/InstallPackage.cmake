# `cmake --install` layout: bin/fgl_infer, lib/libfgl_ops.so,
# lib/libfgl_models.a, lib/libfgl_io.a, lib/libfgl_parallel.a,
# include/fgl/*.h, include/fgl/{models,io,parallel}/*.h and a CMake package,
# so other projects do
#   find_package(fgl REQUIRED)   # with libtorch on CMAKE_PREFIX_PATH too
#   target_link_libraries(app PRIVATE fgl::ops)     # the op
#   target_link_libraries(app PRIVATE fgl::models)  # GatherLinear, weights
#   target_link_libraries(app PRIVATE fgl::io)      # tensor files
#   target_link_libraries(app PRIVATE fgl::parallel)  # tensor parallel
include(CMakePackageConfigHelpers)

set(FGL_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/fgl")

install(TARGETS fgl_ops EXPORT fglTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/ops/include/fgl
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fgl_models fgl_io fgl_parallel EXPORT fglTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/models/include/fgl
                  ${PROJECT_SOURCE_DIR}/io/include/fgl
                  ${PROJECT_SOURCE_DIR}/parallel/include/fgl
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fgl_infer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT fglTargets NAMESPACE fgl:: DESTINATION ${FGL_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/fglConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fglConfig.cmake
  INSTALL_DESTINATION ${FGL_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/fglConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/fglConfig.cmake
  ${PROJECT_BINARY_DIR}/fglConfigVersion.cmake
  DESTINATION ${FGL_CMAKE_DIR})
