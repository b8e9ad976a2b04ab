from . import {{module}} as _oeapatch_oea
