# tree-sitter's C runtime (the version scripts/deps-pins.txt pins: 0.24.0),
# compiled from the pinned PyPI source distribution that scripts/fetch-deps.sh
# unpacks under deps/ (never committed; cmake/OeapatchDeps.cmake runs it when
# deps/ lacks it), as the static library target `tree_sitter` (its api.h is the
# public header).
#
# Why not Debian 12's libtree-sitter 0.20.7: 0.24's query cursors take a
# maximum start depth (ts_query_cursor_set_max_start_depth), so an anchor query
# whose matches must start at its scope node stops walking the tree below the
# depth its pattern needs instead of visiting every node of the file
# (query.c; docs/performance.md). Its parser and query compiler cost the same
# as 0.20.7's (measured), and linking it statically saves its relocation at
# every start. The grammar (ABI 14) loads into it (ABI 13-14).
include(OeapatchDeps)
set(TREE_SITTER_DIR "${PROJECT_SOURCE_DIR}/deps/tree-sitter-${TREE_SITTER_VERSION}"
    CACHE PATH "Unpacked tree-sitter runtime sources (holding lib/src/lib.c and lib/include/tree_sitter/api.h)")
if(NOT EXISTS "${TREE_SITTER_DIR}/lib/src/lib.c" OR NOT EXISTS "${TREE_SITTER_DIR}/lib/include/tree_sitter/api.h")
  message(FATAL_ERROR
    "the tree-sitter ${TREE_SITTER_VERSION} runtime not found at ${TREE_SITTER_DIR}: "
    "run scripts/fetch-deps.sh (it fetches and verifies the pinned PyPI sources)")
endif()
# lib.c includes every other source of the runtime (its own unity build).
add_library(tree_sitter STATIC "${TREE_SITTER_DIR}/lib/src/lib.c")
target_include_directories(tree_sitter PRIVATE "${TREE_SITTER_DIR}/lib/src")
target_include_directories(tree_sitter SYSTEM PUBLIC "${TREE_SITTER_DIR}/lib/include")
# Third-party code: its warnings are not ours to fix. Optimised whatever the
# build type: it is where the CLI spends its time. Position-independent (the
# project's default) yet linked only statically: -fno-semantic-interposition
# lets the compiler inline the runtime's own exported helpers
# (ts_language_table_entry, ts_language_next_state...) into the parser, as a
# non-PIC build would; with -O3, 4.5% fewer instructions for verify
# (docs/performance.md).
target_compile_options(tree_sitter PRIVATE -w -O3 -fno-semantic-interposition)
set_target_properties(tree_sitter PROPERTIES C_STANDARD 11 C_EXTENSIONS ON POSITION_INDEPENDENT_CODE ON)
if(OEAPATCH_SANITIZE)
  string(REPLACE ";" "," _san "${OEAPATCH_SANITIZE}")
  target_compile_options(tree_sitter PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer)
endif()
