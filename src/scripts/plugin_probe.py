import sys
if sys.path and sys.path[0] == '' and not getattr(sys.flags, 'safe_path', False):
    del sys.path[0]
import importlib.metadata as md, re
group, name, seen = sys.argv[1], sys.argv[2], set()
for d in md.distributions():
    n = d.metadata['Name'] or ''
    key = re.sub(r'[-_.]+', '-', n).lower()
    if key in seen:
        continue
    seen.add(key)
    if any(e.group == group and e.name == name for e in d.entry_points):
        print(n + '\t' + (d.version or ''))
        sys.exit(0)
print()
