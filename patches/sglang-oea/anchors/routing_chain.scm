; The routing chain: an if/elif/else statement of select_experts' own body
; (@in is the function, so nested functions do not count). Which one is
; decided by `contains` (binds_pair.scm): the chain is the statement in
; which `topk_weights, topk_ids = <helper>(...)` is bound, at any depth,
; since some eras bind it in a nested `if correction_bias is None:`.
((function_definition
   body: (block
     (if_statement) @chain)) @in)
