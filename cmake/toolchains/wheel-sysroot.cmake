# The wheel's cross build (scripts/build-wheel.sh): Debian 12's clang for the
# target, compiling and linking against a Debian 11 sysroot
# (scripts/wheel-sysroot.sh), so that the binaries need glibc 2.31 at most and
# link bullseye's libgit2, jansson, inih and OpenSSL, which auditwheel copies
# into the wheel. Read from the environment (a toolchain file is read again
# in every try_compile, where -D values are not passed on):
#   OEAPATCH_WHEEL_TRIPLET   x86_64-linux-gnu or aarch64-linux-gnu
#   OEAPATCH_WHEEL_SYSROOT   the sysroot
set(_triplet "$ENV{OEAPATCH_WHEEL_TRIPLET}")
if(NOT _triplet MATCHES "^(x86_64|aarch64)-linux-gnu$" OR NOT IS_DIRECTORY "$ENV{OEAPATCH_WHEEL_SYSROOT}")
  message(FATAL_ERROR "wheel-sysroot.cmake: set OEAPATCH_WHEEL_TRIPLET (x86_64-linux-gnu or aarch64-linux-gnu; "
                      "got '${_triplet}') and OEAPATCH_WHEEL_SYSROOT (a directory; got '$ENV{OEAPATCH_WHEEL_SYSROOT}')")
endif()
string(REGEX REPLACE "-.*" "" _processor "${_triplet}")
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR "${_processor}")
set(CMAKE_SYSROOT "$ENV{OEAPATCH_WHEEL_SYSROOT}")
# clang, not GCC: Debian's GCC (native or cross) finds crt1.o and libc.so in
# its own prefix before the sysroot's, so its binaries would ask for the
# build machine's glibc 2.36; clang's driver takes them from the sysroot only
# (crtbegin and libgcc.a, static, from the machine's GCC). It links with the
# target's GNU ld (binutils, or binutils-aarch64-linux-gnu).
set(CMAKE_C_COMPILER clang)
# glibc 2.29's new versions of exp, log, log2, pow... bound to the old ones
# (wheel-glibc-compat.h says why), so that the math the CLI does stays
# within manylinux_2_28.
set(CMAKE_C_FLAGS_INIT "-include ${CMAKE_CURRENT_LIST_DIR}/wheel-glibc-compat.h")
set(CMAKE_C_COMPILER_TARGET "${_triplet}")
set(CMAKE_LIBRARY_ARCHITECTURE "${_triplet}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config: the sysroot's .pc files only (its /usr/local first: the
# libgit2 of scripts/wheel-libgit2.sh), their paths prefixed with it.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${CMAKE_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${CMAKE_SYSROOT}/usr/local/lib/pkgconfig:${CMAKE_SYSROOT}/usr/lib/${_triplet}/pkgconfig:${CMAKE_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# The CUDA kernel (OEA_CUDA on): nvcc's host compiler is clang++ for the
# target against the sysroot too (wheel-sysroot-clang++ says why a wrapper),
# whose C++ headers and libstdc++ are bullseye's GCC 10 (wheel-sysroot.sh).
# The C++ runtime and libgcc that nvcc's host code needs (guard variables,
# the personality routine) are linked statically into liboea and kept private
# (--exclude-libs,ALL, native/CMakeLists.txt), like the static CUDA runtime:
# liboea then asks the machine for glibc only.
# build-wheel.sh names a copy of it at a path keyed by its content
# (OEAPATCH_WHEEL_CCBIN): ccache hashes nvcc's -ccbin argument as written, so
# the clone's own path would make every clone miss the kernel's objects.
if(DEFINED ENV{OEAPATCH_WHEEL_CCBIN})
  set(CMAKE_CUDA_HOST_COMPILER "$ENV{OEAPATCH_WHEEL_CCBIN}")
else()
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CURRENT_LIST_DIR}/wheel-sysroot-clang++")
endif()
# (On CUDA links only: a C link by clang warns that -static-libstdc++ is unused.)
set(CMAKE_CUDA_STANDARD_LIBRARIES_INIT "-static-libstdc++ -static-libgcc")
