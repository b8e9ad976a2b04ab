# OEAPATCH_WHEEL=ON (set by pyproject.toml when scikit-build-core builds the
# wheel): what a wheel adds to `cmake --install`. The install prefix is then
# the package folder site-packages/oeapatch/, so bin/oeapatch,
# lib/liboea.so.<version> and share/oeapatch/patches keep the layout the
# executable looks for relative to itself (src/CMakeLists.txt).
#
#   share/oeapatch/build.txt   which liboea the wheel carries: CUDA machine
#                              code for which GPUs, or the CPU library only
#   <data>/share/man/man1/oeapatch.1, <data>/share/bash-completion/completions/oeapatch
#                              installed under the environment's prefix (the
#                              wheel's .data/data), where `man` and
#                              bash-completion look for a command found in
#                              <prefix>/bin
if(NOT OEAPATCH_WHEEL)
  return()
endif()

get_target_property(_oea_sources oea SOURCES)
set(_oea_cuda "CPU only (no CUDA toolkit at build time: OEA runs on the CPU reference; the CUDA entry point reports \"not built with CUDA\")")
if(_oea_sources MATCHES "\\.cu(;|$)")
  get_target_property(_oea_archs oea CUDA_ARCHITECTURES)
  set(_oea_cuda "with CUDA: ${_oea_archs} (-real: machine code only; a bare number: machine code and PTX)")
endif()
file(GENERATE OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/wheel-build.txt" CONTENT
"oeapatch ${PROJECT_VERSION} wheel
liboea: lib/$<TARGET_FILE_NAME:oea> ${_oea_cuda}
")
message(STATUS "oeapatch wheel: liboea ${_oea_cuda}")
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/wheel-build.txt"
  DESTINATION "${CMAKE_INSTALL_DATADIR}/oeapatch" RENAME build.txt)

if(DEFINED SKBUILD_DATA_DIR)
  install(FILES "${PROJECT_SOURCE_DIR}/docs/oeapatch.1" DESTINATION "${SKBUILD_DATA_DIR}/share/man/man1")
  install(FILES "${PROJECT_SOURCE_DIR}/contrib/completion/oeapatch.bash"
    DESTINATION "${SKBUILD_DATA_DIR}/share/bash-completion/completions" RENAME oeapatch)
endif()
