; The routing statement: a statement of the method's own body (@in is the
; method, so nested functions such as 0.14's valid_grouping() do not count)
; that binds `topk_weights, topk_ids` (decided by `contains`, binds_pair.scm):
; the if/elif/else chain up to 0.14 (some branches bind it in a nested if),
; from 0.15 the single `topk_weights, topk_ids = self._compute_routing(...)`.
; Statements after it (EPLB's `if enable_eplb:`, the capture, the dtype
; conversion) rebind topk_ids alone and never match.
((function_definition
   body: (block
     (if_statement) @routing)) @in)

((function_definition
   body: (block
     (expression_statement
       (assignment)) @routing)) @in)
