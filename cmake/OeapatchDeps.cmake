# The pinned third-party sources (scripts/deps-pins.txt, the one place their
# versions and digests are written): sets TREE_SITTER_VERSION and
# TREE_SITTER_PYTHON_VERSION, and when deps/ lacks either source tree runs
# scripts/fetch-deps.sh, which takes them from its cache or downloads them
# with pip and refuses any whose SHA-256 is not the pinned one. That is what
# lets `pip install .` / `pip wheel .` / `pip install git+URL` build from a
# clean clone, where nothing ran scripts/setup-deps.sh; an sdist carries
# deps/ and never fetches. -DOEAPATCH_FETCH_DEPS=OFF makes a missing source
# an error instead (a build that must not reach the network).
include_guard(GLOBAL)
option(OEAPATCH_FETCH_DEPS "Fetch the pinned, digest-checked tree-sitter sources into deps/ when missing" ON)

set(_oea_pins "${PROJECT_SOURCE_DIR}/scripts/deps-pins.txt")
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_oea_pins}")
file(STRINGS "${_oea_pins}" _oea_pin_lines REGEX "^[a-z]")
foreach(_line IN LISTS _oea_pin_lines)
  string(REGEX MATCH "^([a-z-]+)[ \t]+([0-9.]+)[ \t]+([0-9a-f]+)" _m "${_line}")
  if(CMAKE_MATCH_1 STREQUAL "tree-sitter")
    set(TREE_SITTER_VERSION "${CMAKE_MATCH_2}")
  elseif(CMAKE_MATCH_1 STREQUAL "tree-sitter-python")
    set(TREE_SITTER_PYTHON_VERSION "${CMAKE_MATCH_2}")
  endif()
endforeach()
if(NOT TREE_SITTER_VERSION OR NOT TREE_SITTER_PYTHON_VERSION)
  message(FATAL_ERROR "${_oea_pins} must pin tree-sitter and tree-sitter-python (NAME VERSION SHA256)")
endif()

set(_oea_deps "${PROJECT_SOURCE_DIR}/deps")
if(OEAPATCH_FETCH_DEPS AND (
    NOT EXISTS "${_oea_deps}/tree-sitter-${TREE_SITTER_VERSION}/lib/src/lib.c" OR
    NOT EXISTS "${_oea_deps}/tree-sitter-python-${TREE_SITTER_PYTHON_VERSION}/src/parser.c"))
  # The interpreter that runs the build (scikit-build-core names it) is the
  # first to try for pip: it is the user's, with the user's index settings.
  set(_oea_py "")
  if(DEFINED Python_EXECUTABLE)
    set(_oea_py "${Python_EXECUTABLE}")
  endif()
  message(STATUS "deps/ lacks the pinned tree-sitter ${TREE_SITTER_VERSION} runtime or tree-sitter-python "
                 "${TREE_SITTER_PYTHON_VERSION}: scripts/fetch-deps.sh")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env "OEAPATCH_PIP_PYTHON=${_oea_py}"
            bash "${PROJECT_SOURCE_DIR}/scripts/fetch-deps.sh" "${_oea_deps}"
    RESULT_VARIABLE _oea_rc ERROR_VARIABLE _oea_err OUTPUT_QUIET)
  if(NOT _oea_rc EQUAL 0)
    message(FATAL_ERROR "the pinned tree-sitter sources could not be put under ${_oea_deps} "
                        "(scripts/fetch-deps.sh, exit ${_oea_rc}):\n${_oea_err}")
  endif()
  message(STATUS "${_oea_err}")
endif()
