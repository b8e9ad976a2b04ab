import sys
if sys.path and sys.path[0] == '' and not getattr(sys.flags, 'safe_path', False):
    del sys.path[0]
import importlib.util, os, platform
print(sys.executable)
print(platform.python_version())
names, found = sys.argv[1:], {}
for name in names:
    s = importlib.util.find_spec(name)
    locs = list(s.submodule_search_locations or []) if s else []
    found[name] = locs[0] if locs else os.path.dirname(s.origin) if s and s.origin else ''
# Two frameworks found: one installed only because the other requires it (no
# REQUESTED marker in its dist-info, named in the other's Requires-Dist: SGLang
# 0.4.x requires vLLM) is not one the user chose to serve, so not a candidate.
if sum(1 for n in names if found[n]) > 1:
    try:
        import importlib.metadata as md, re
        def dist(n):
            try:
                return md.distribution(n)
            except Exception:
                return None
        def key(r):
            return re.split(r'[^A-Za-z0-9._-]', r.strip(), 1)[0].lower().replace('_', '-')
        ds = {n: dist(n) for n in names if found[n]}
        needs = {n: {key(r) for r in (d.requires or [])} if d else set() for n, d in ds.items()}
        only = [n for n, d in ds.items() if d is not None and d.read_text('REQUESTED') is None
                and any(o != n and n.lower().replace('_', '-') in needs[o] for o in ds)]
        if len(only) < len(ds):
            for n in only:
                found[n] = ''
    except Exception:
        pass
for name in names:
    print(found[name])
