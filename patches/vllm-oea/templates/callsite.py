if _oeapatch_oea.ENABLED:
    topk_weights, topk_ids = _oeapatch_oea.route(
        {{args}}
    )
