# The programs the CLI runs (src/scripts/: the Python it hands an interpreter,
# the shell of the git hooks it writes) are kept as .py and .sh files, where
# they can be read, compiled and linted, and embedded into the executable at
# build time: one generated C file with each file's bytes as an array
# (oeap_script_<name>, NUL-terminated) and a header declaring them.
#
# oeapatch_embed_scripts(TARGET DIR FILE...) adds them to TARGET. The output
# depends on the bytes of the files only (no dates, no absolute paths), so the
# build stays reproducible.
function(oeapatch_embed_scripts tgt dir)
  set(out_c "${CMAKE_CURRENT_BINARY_DIR}/embedded_scripts.c")
  set(out_h "${CMAKE_CURRENT_BINARY_DIR}/embedded_scripts.h")
  set(inputs "")
  foreach(f IN LISTS ARGN)
    list(APPEND inputs "${dir}/${f}")
  endforeach()
  string(REPLACE ";" "|" inputs_arg "${inputs}")
  add_custom_command(OUTPUT "${out_c}" "${out_h}"
    COMMAND ${CMAKE_COMMAND} "-DOUT_C=${out_c}" "-DOUT_H=${out_h}" "-DINPUTS=${inputs_arg}"
            -P "${PROJECT_SOURCE_DIR}/cmake/OeapatchEmbedRun.cmake"
    DEPENDS ${inputs} "${PROJECT_SOURCE_DIR}/cmake/OeapatchEmbedRun.cmake"
    COMMENT "Embedding src/scripts/ into the CLI" VERBATIM)
  target_sources(${tgt} PRIVATE "${out_c}")
  target_include_directories(${tgt} PUBLIC "${CMAKE_CURRENT_BINARY_DIR}")
endfunction()
