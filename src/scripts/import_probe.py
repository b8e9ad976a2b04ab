# Run by the server's interpreter (src/importsys.c): no package's __init__ runs
# (the top level is found with find_spec, which imports nothing for a top-level
# name; every level below with PathFinder on its parent's folders, as the import
# system does once the parent is imported). The current folder the `-c` puts
# first on sys.path is dropped (the query runs from "/" too): it is ours, not
# the server's.
import sys
if sys.path and sys.path[0] == '' and not getattr(sys.flags, 'safe_path', False):
    del sys.path[0]
import importlib.machinery as M, importlib.util as U, marshal, os, types
w = sys.stdout.write
def h(s):
    return os.fsencode(s).hex() if s else '-'
def kind(spec):
    if spec is None: return 'missing'
    if not spec.has_location:
        return 'namespace' if spec.submodule_search_locations is not None else 'other'
    if spec.submodule_search_locations is not None: return 'package'
    if isinstance(spec.loader, M.ExtensionFileLoader): return 'extension'
    if isinstance(spec.loader, M.SourcelessFileLoader): return 'sourceless'
    if isinstance(spec.loader, M.SourceFileLoader): return 'source'
    return 'other'
def resolve(name):
    parts = name.split('.')
    cur = parts[0]
    try:
        spec = U.find_spec(cur)
    except (ImportError, ValueError):
        spec = None
    for p in parts[1:]:
        locs = None if spec is None else spec.submodule_search_locations
        if not locs:
            return cur, spec
        # A level without __init__ (SGLang's srt/, layers/, moe/) is a
        # namespace portion, whose path the finder computes from the parent's
        # __path__ in sys.modules, where the import system has put the parent
        # by then: a placeholder module with the parent's spec stands in for
        # it, so that no __init__ runs (without it PathFinder raises KeyError).
        if cur not in sys.modules:
            m = types.ModuleType(cur)
            m.__path__, m.__spec__ = list(locs), spec
            sys.modules[cur] = m
        cur = cur + '.' + p
        spec = M.PathFinder.find_spec(cur, list(locs))
    return None, spec
tag = sys.implementation.cache_tag
pre = getattr(sys, 'pycache_prefix', None)
w('T %s\n' % (tag or '-'))
w('P %s\n' % h(pre))
names, paths = sys.argv[1:3], sys.argv[3:5]
dirs = set()
for i, (name, path) in enumerate(zip(names, paths)):
    try:
        stop, spec = resolve(name)
    except Exception as e:
        w('E %s\n' % h('%s: %s' % (type(e).__name__, e)))
        sys.exit(3)
    origin = spec.origin if spec is not None and spec.has_location else None
    w('R %d %s %s %s\n' % (i, kind(spec), h(origin), h(stop)))
    if pre and tag:
        for p in {path, origin or path}:
            try:
                d = os.path.dirname(U.cache_from_source(p))
            except (NotImplementedError, ValueError):
                continue
            if d not in dirs:
                dirs.add(d)
                w('C %s\n' % h(d))
for path in paths:
    try:
        st = os.stat(path)
        with open(path, 'rb') as f: data = f.read()
    except OSError:
        continue
    stem = os.path.basename(path)[:-3]
    for d in sorted(dirs | {os.path.join(os.path.dirname(path), '__pycache__')}):
        try: entries = os.listdir(d)
        except OSError: continue
        for e in entries:
            if not tag or not e.startswith(stem + '.' + tag + '.') or not e.endswith('.pyc'): continue
            pyc = os.path.join(d, e)
            try:
                with open(pyc, 'rb') as f: b = f.read()
            except OSError:
                continue
            if len(b) < 16 or b[:4] != U.MAGIC_NUMBER or int.from_bytes(b[4:8], 'little') != 0: continue
            if int.from_bytes(b[8:12], 'little') != int(st.st_mtime) & 0xFFFFFFFF: continue
            if int.from_bytes(b[12:16], 'little') != st.st_size & 0xFFFFFFFF: continue
            rest = e[len(stem) + len(tag) + 2:-4]
            opt = int(rest[4:]) if rest.startswith('opt-') and rest[4:].isdigit() else 0
            try:
                same = marshal.loads(b[16:]) == compile(data, path, 'exec', dont_inherit=True, optimize=opt)
            except Exception:
                same = False
            w('V %s %s\n' % (h(pyc), 'same' if same else 'differs'))
