# Warnings and sanitizers shared by every C target of the project.
function(oeapatch_target_defaults tgt)
  target_compile_options(${tgt} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter>)
  if(OEAPATCH_SANITIZE)
    string(REPLACE ";" "," _san "${OEAPATCH_SANITIZE}")
    target_compile_options(${tgt} PRIVATE
      $<$<COMPILE_LANGUAGE:C>:-fsanitize=${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
    target_link_options(${tgt} PRIVATE -fsanitize=${_san})
  endif()
endfunction()
