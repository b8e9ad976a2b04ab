; The module-level function select_experts, decorated or not. @in is the
; module itself: a method or a nested function of that name does not count,
; and two module-level definitions are ambiguous.
((module
   (function_definition
     name: (identifier) @name) @function) @in
 (#eq? @name "select_experts"))

((module
   (decorated_definition
     definition: (function_definition
       name: (identifier) @name) @function)) @in
 (#eq? @name "select_experts"))
