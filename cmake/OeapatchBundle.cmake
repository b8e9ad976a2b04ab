# OEAPATCH_BUNDLE=ON: `cmake --install` makes a self-contained install that runs
# on a machine without the build's libraries (a container image, a server):
#   bin/oeapatch                   RUNPATH $ORIGIN/../<libdir>/oeapatch
#   <libdir>/liboea.so*            (needs only glibc)
#   <libdir>/oeapatch/*.so*        every library oeapatch needs except glibc's,
#                                  resolved at install time, RUNPATH $ORIGIN
#   share/oeapatch/bundle.txt      what was bundled, from which package
#   share/doc/oeapatch/bundled/    their copyright files
# The target needs glibc (bundle.txt says which version) and nothing else.
# The install tree can be moved as a whole: every path in it is relative.
# The option itself is declared in the top-level CMakeLists.txt.

function(oeapatch_bundle exe_target oea_target)
  if(NOT OEAPATCH_BUNDLE)
    return()
  endif()
  find_program(OEAPATCH_PATCHELF patchelf)
  if(NOT OEAPATCH_PATCHELF)
    message(FATAL_ERROR "OEAPATCH_BUNDLE=ON needs patchelf (apt-get install patchelf; scripts/setup-deps.sh build installs it)")
  endif()
  find_program(OEAPATCH_OBJDUMP NAMES objdump)
  foreach(dir BINDIR LIBDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      message(FATAL_ERROR "OEAPATCH_BUNDLE=ON needs a relative CMAKE_INSTALL_${dir} (the bundle is relocatable)")
    endif()
  endforeach()
  file(RELATIVE_PATH rel "/p/${CMAKE_INSTALL_BINDIR}" "/p/${CMAKE_INSTALL_LIBDIR}/oeapatch")
  set_target_properties(${exe_target} PROPERTIES INSTALL_RPATH "$ORIGIN/${rel}")
  install(CODE "
    set(OEAPATCH_BUNDLE_EXE \"$<TARGET_FILE:${exe_target}>\")
    set(OEAPATCH_BUNDLE_OEA \"$<TARGET_FILE:${oea_target}>\")
    set(OEAPATCH_BUNDLE_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
    set(OEAPATCH_BUNDLE_DATADIR \"${CMAKE_INSTALL_DATADIR}\")
    set(OEAPATCH_BUNDLE_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
    set(OEAPATCH_PATCHELF \"${OEAPATCH_PATCHELF}\")
    set(OEAPATCH_OBJDUMP \"${OEAPATCH_OBJDUMP}\")")
  install(SCRIPT "${PROJECT_SOURCE_DIR}/cmake/OeapatchBundleInstall.cmake")
endfunction()
