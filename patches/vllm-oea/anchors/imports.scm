; Module-level import statements (not the ones inside `if _is_cuda:` and
; similar blocks): the import region goes after the last of them.
((module (import_statement) @import) @in)
((module (import_from_statement) @import) @in)
((module (future_import_statement) @import) @in)
