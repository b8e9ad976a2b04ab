; `topk_weights, topk_ids = ...` (or with parentheses): the binding that
; makes an if-chain the routing chain. Order matters: the later
; `topk_ids, topk_weights = _post_process_topk_ids(...)` is post-processing.
((assignment
   left: (pattern_list . (identifier) @weights . (identifier) @ids .)) @match
 (#eq? @weights "topk_weights")
 (#eq? @ids "topk_ids"))

((assignment
   left: (tuple_pattern . (identifier) @weights . (identifier) @ids .)) @match
 (#eq? @weights "topk_weights")
 (#eq? @ids "topk_ids"))
