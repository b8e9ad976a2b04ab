# The libraries oeapatch links come from the system (Debian packages; the
# wheel's auditwheel repair copies them in). A pip build from source fails
# here when one is missing, and the person reading pip's log needs the
# package to install, not pkg-config's module name.
include_guard(GLOBAL)
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: install the Debian package pkg-config "
                      "(apt-get install pkg-config; scripts/setup-deps.sh installs every build dependency)")
endif()

# oeapatch_require_pkg(PREFIX MODULE DEBIAN_PACKAGE): pkg_check_modules with
# an imported target PkgConfig::PREFIX, or an error naming the package.
macro(oeapatch_require_pkg prefix module deb)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "${module} not found (pkg-config ${module}): install the Debian package ${deb} "
                        "(apt-get install ${deb}; scripts/setup-deps.sh installs every build dependency)")
  endif()
endmacro()
