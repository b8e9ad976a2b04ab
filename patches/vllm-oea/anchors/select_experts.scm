; The method that routes: select_experts or _select_experts of the class
; FusedMoE (layer.py, 0.5.5 - 0.14: a @staticmethod up to 0.11, an instance
; method from 0.12, renamed _select_experts in 0.14) or BaseRouter
; (router/base_router.py, 0.15 on: select_experts, later _select_experts).
; The method decorated or not, the class too (FusedMoE is registered with
; @CustomOp.register(...) from 0.10). @in is the module: only a
; module-level class counts. Where a class has both names, `contains`
; (binds_pair.scm) keeps the one that binds `topk_weights, topk_ids`.
((module
   (class_definition
     name: (identifier) @class
     body: (block
       (function_definition
         name: (identifier) @name) @method))) @in
 (#match? @class "^(FusedMoE|BaseRouter)$")
 (#match? @name "^_?select_experts$"))

((module
   (class_definition
     name: (identifier) @class
     body: (block
       (decorated_definition
         definition: (function_definition
           name: (identifier) @name) @method)))) @in
 (#match? @class "^(FusedMoE|BaseRouter)$")
 (#match? @name "^_?select_experts$"))

((module
   (decorated_definition
     definition: (class_definition
       name: (identifier) @class
       body: (block
         (function_definition
           name: (identifier) @name) @method)))) @in
 (#match? @class "^(FusedMoE|BaseRouter)$")
 (#match? @name "^_?select_experts$"))

((module
   (decorated_definition
     definition: (class_definition
       name: (identifier) @class
       body: (block
         (decorated_definition
           definition: (function_definition
             name: (identifier) @name) @method))))) @in
 (#match? @class "^(FusedMoE|BaseRouter)$")
 (#match? @name "^_?select_experts$"))
