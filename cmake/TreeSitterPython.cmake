# The tree-sitter-python grammar (the version scripts/deps-pins.txt pins),
# compiled from the pinned PyPI source distribution that scripts/fetch-deps.sh
# unpacks under deps/ (never committed; cmake/OeapatchDeps.cmake runs it),
# with tree-sitter's generator headers beside it. Defines the static library
# target `tree_sitter_python`.
include(OeapatchDeps)
set(TREE_SITTER_PYTHON_DIR "${PROJECT_SOURCE_DIR}/deps/tree-sitter-python-${TREE_SITTER_PYTHON_VERSION}"
    CACHE PATH "Unpacked tree-sitter-python sources (holding src/parser.c and src/tree_sitter/parser.h)")
if(NOT EXISTS "${TREE_SITTER_PYTHON_DIR}/src/parser.c" OR NOT EXISTS "${TREE_SITTER_PYTHON_DIR}/src/tree_sitter/parser.h")
  message(FATAL_ERROR
    "tree-sitter-python ${TREE_SITTER_PYTHON_VERSION} not found at ${TREE_SITTER_PYTHON_DIR}: "
    "run scripts/fetch-deps.sh (it fetches and verifies the pinned PyPI sources)")
endif()
add_library(tree_sitter_python STATIC
  "${TREE_SITTER_PYTHON_DIR}/src/parser.c"
  "${TREE_SITTER_PYTHON_DIR}/src/scanner.c")
target_include_directories(tree_sitter_python PRIVATE "${TREE_SITTER_PYTHON_DIR}/src")
# Third-party generated code: its warnings are not ours to fix. Optimised as
# the runtime is (TreeSitterRuntime.cmake): the lexer is part of every parse.
target_compile_options(tree_sitter_python PRIVATE -w -O3 -fno-semantic-interposition)
# The scanner allocates through tree-sitter's ts_malloc family. The generator's own
# alloc.h maps them to the C library unless a grammar opts into sharing the runtime's
# allocator (TREE_SITTER_REUSE_ALLOCATOR, which we do not set: the runtime uses the
# C library's too), so map them here.
target_compile_definitions(tree_sitter_python PRIVATE
  ts_malloc=malloc ts_calloc=calloc ts_realloc=realloc ts_free=free)
set_target_properties(tree_sitter_python PROPERTIES C_STANDARD 11 C_EXTENSIONS ON)
if(OEAPATCH_SANITIZE)
  string(REPLACE ";" "," _san "${OEAPATCH_SANITIZE}")
  target_compile_options(tree_sitter_python PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer)
endif()
