# Run by `cmake --install` when the build was configured with
# -DOEAPATCH_BUNDLE=ON (see cmake/OeapatchBundle.cmake): copies every shared
# library that oeapatch and liboea need, except glibc's own, into
# <libdir>/oeapatch/, under the name the loader asks for (the soname), and
# gives each copy RUNPATH $ORIGIN so that they find each other there. The
# executable's RUNPATH ($ORIGIN/../<libdir>/oeapatch) was set by CMake.
# Writes <datadir>/oeapatch/bundle.txt (what was bundled, from which Debian
# package, and the glibc the bundle needs) and copies each package's
# copyright file to <docdir>/bundled/.
#
# Inputs (set by install(CODE) before this script): OEAPATCH_BUNDLE_EXE and
# OEAPATCH_BUNDLE_OEA (the build-tree files, resolved against the build
# machine's libraries, never against an earlier bundle), OEAPATCH_BUNDLE_LIBDIR,
# OEAPATCH_BUNDLE_DATADIR, OEAPATCH_BUNDLE_DOCDIR (relative to the prefix),
# OEAPATCH_PATCHELF, OEAPATCH_OBJDUMP (may be empty).

set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(dest "${prefix}/${OEAPATCH_BUNDLE_LIBDIR}/oeapatch")
set(docdest "${prefix}/${OEAPATCH_BUNDLE_DOCDIR}/bundled")
set(manifest "${prefix}/${OEAPATCH_BUNDLE_DATADIR}/oeapatch/bundle.txt")

# glibc: the target's C library, never bundled (a libc must match its own
# loader, and the loader is the image's /lib64/ld-linux-x86-64.so.2).
set(glibc_regexes
  "^ld-linux" "^linux-vdso" "^libc\\.so" "^libm\\.so" "^libdl\\.so" "^libpthread\\.so"
  "^librt\\.so" "^libresolv\\.so" "^libutil\\.so" "^libanl\\.so" "^libnsl\\.so"
  "^libmvec\\.so" "^libBrokenLocale\\.so" "^libnss_" "^libthread_db\\.so")
# The GPU driver's libraries come from the host, never from us.
list(APPEND glibc_regexes "^libcuda\\.so" "^libnvidia-")

file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES "${OEAPATCH_BUNDLE_EXE}"
  LIBRARIES "${OEAPATCH_BUNDLE_OEA}"
  RESOLVED_DEPENDENCIES_VAR deps
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  PRE_EXCLUDE_REGEXES ${glibc_regexes})
if(unresolved)
  message(FATAL_ERROR "oeapatch bundle: unresolved libraries: ${unresolved}")
endif()

file(REMOVE_RECURSE "${dest}" "${docdest}")
file(MAKE_DIRECTORY "${dest}" "${docdest}")
set(lines "# Libraries bundled in ${OEAPATCH_BUNDLE_LIBDIR}/oeapatch/ (soname, Debian package and version, copied from)")
set(copied_packages "")
set(files_for_glibc "${OEAPATCH_BUNDLE_EXE}" "${OEAPATCH_BUNDLE_OEA}")
list(SORT deps)
foreach(dep IN LISTS deps)
  get_filename_component(soname "${dep}" NAME)
  get_filename_component(real "${dep}" REALPATH)
  set(out "${dest}/${soname}")
  message(STATUS "Bundling: ${out} (from ${real})")
  file(COPY_FILE "${real}" "${out}")
  file(CHMOD "${out}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  execute_process(COMMAND "${OEAPATCH_PATCHELF}" --set-rpath "$ORIGIN" "${out}"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "oeapatch bundle: patchelf --set-rpath failed on ${out}: ${err}")
  endif()
  list(APPEND files_for_glibc "${real}")
  # Which Debian package it came from: for updates and for its licence.
  set(pkg "?")
  set(ver "?")
  execute_process(COMMAND dpkg-query -S "${real}" OUTPUT_VARIABLE owner
    RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT rc EQUAL 0)
    # usrmerge: the package may list the /lib path of a /usr/lib file or the other way round.
    string(REGEX REPLACE "^/usr/lib/" "/lib/" alt "${real}")
    execute_process(COMMAND dpkg-query -S "${alt}" OUTPUT_VARIABLE owner
      RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(rc EQUAL 0)
    string(REGEX REPLACE ":.*" "" pkg "${owner}")
    execute_process(COMMAND dpkg-query -W -f=\${Version} "${pkg}" OUTPUT_VARIABLE ver
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    string(REGEX REPLACE ":[a-z0-9]+$" "" pkgbase "${pkg}")
    list(FIND copied_packages "${pkgbase}" seen)
    if(seen EQUAL -1 AND EXISTS "/usr/share/doc/${pkgbase}/copyright")
      file(COPY_FILE "/usr/share/doc/${pkgbase}/copyright" "${docdest}/${pkgbase}.copyright")
      list(APPEND copied_packages "${pkgbase}")
    endif()
  endif()
  list(APPEND lines "${soname} ${pkg} ${ver} ${real}")
endforeach()

# The newest GLIBC_x.y symbol version anything in the bundle asks for: the
# oldest glibc a target image may have.
set(glibc_need "unknown (no objdump)")
if(OEAPATCH_OBJDUMP)
  set(best_major 0)
  set(best_minor 0)
  foreach(f IN LISTS files_for_glibc)
    execute_process(COMMAND "${OEAPATCH_OBJDUMP}" -T "${f}" OUTPUT_VARIABLE syms ERROR_QUIET)
    string(REGEX MATCHALL "GLIBC_[0-9]+\\.[0-9]+" vers "${syms}")
    list(REMOVE_DUPLICATES vers)
    foreach(v IN LISTS vers)
      string(REGEX REPLACE "GLIBC_([0-9]+)\\.([0-9]+)" "\\1;\\2" mm "${v}")
      list(GET mm 0 major)
      list(GET mm 1 minor)
      if(major GREATER best_major OR (major EQUAL best_major AND minor GREATER best_minor))
        set(best_major ${major})
        set(best_minor ${minor})
      endif()
    endforeach()
  endforeach()
  set(glibc_need "${best_major}.${best_minor}")
endif()
list(APPEND lines "# needs from the target: glibc >= ${glibc_need} (libc.so.6, libm.so.6, libresolv.so.2, ld-linux-x86-64.so.2)")
list(JOIN lines "\n" text)
file(WRITE "${manifest}" "${text}\n")
message(STATUS "Bundle: ${manifest}")
