#!/usr/bin/env bash
# What the server's interpreter imports, not only which files are there
# (issue 25, items 3-8). Each case is decided by the real import system
# (importlib.machinery.PathFinder on the module's folder: FileFinder's order;
# SourceFileLoader.get_code: the code an import runs), then verify must agree:
#  8. --python asks the interpreter in the server's environment: PYTHONPATH
#     from this environment or --env-file (a site found only through it is
#     applied; a PYTHONPATH that names another sglang is what verify checks),
#     never from the caller's current folder; the python: line names it;
#  3. an extension module beside topk.py (the interpreter's own suffix,
#     .abi3.so, .so) or beside the binding module wins: verify FAILs
#     import:target / import:binding, with --python and with -C;
#  3b. apply refuses those (the same rule), nothing written;
#  4. a package folder topk/ (or _oeapatch_sglang_oea/) with an __init__
#     wins: verify and status FAIL; a folder without __init__ does not; a
#     package level without __init__ (moe/) loses to a module beside it
#     (layers/moe.py): verify FAILs, by the interpreter and the C rules;
#  5. root compiled under umask 000 (__pycache__ 0777, pycs 0666); another
#     user (nobody) swaps in a timestamp pyc matching the source's stamp that
#     holds the string _oeapatch_sglang_oea: the loader runs it; verify FAILs
#     trust:bytecode, and with --python bytecode (the interpreter compiled the
#     source and compared: a name in the file does not fool it);
#  6. a sticky package folder (1777): nobody adds topk/__init__.py and it is
#     imported; verify FAILs the folder; a sticky folder above site-packages
#     still passes;
#  7. PYTHONPYCACHEPREFIX (this environment, --env-file): a pyc there runs;
#     verify FAILs bytecode naming it, apply removes it, the prefix folder is
#     under the trust rule (sticky or not);
#  also: a stale timestamp pyc of the binding module rendered for another
#     library, stamped as the new module (fixed-mtime image layers): verify
#     FAILs bytecode (with -C by the recorded library the pyc lacks).
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY, OEAPATCH_SOURCE_DIR.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
fix=$OEAPATCH_SOURCE_DIR/tests/fixtures
py=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
rel=sglang/srt/layers/moe

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-import.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
chmod 755 "$work" # nobody walks to the site below
. "$(dirname "$0")/testlib.sh"
for v in $(env | grep -o '^SGLANG_OEA_[A-Z_]*'); do unset "$v"; done
unset PYTHONPATH PYTHONPYCACHEPREFIX PYTHONSAFEPATH

# site DIR: the fixture package laid out as site-packages, with an era of topk.py.
site() {
	mkdir -p "$1"
	cp -r "$fix/pkg/python/sglang" "$1/"
	cp "$fix/eras/2025-08_topk_config.py" "$1/$rel/topk.py"
}
# finds DIR NAME: the file the interpreter's path finder picks for NAME in DIR.
finds() {
	"$py" -c 'import importlib.machinery as m, sys
s = m.PathFinder.find_spec(sys.argv[2], [sys.argv[1]])
print(s.origin if s and s.has_location else "")' "$1" "$2"
}
# runs FILE [ENV...]: what the loader would run for FILE ("patched" when it
# imports the binding, "EVIL" when it is the planted code, else "unpatched").
runs() {
	local file=$1
	shift
	env "$@" "$py" -B -c '
import importlib.machinery, sys
code = importlib.machinery.SourceFileLoader("topk", sys.argv[1]).get_code("topk")
print("EVIL" if "EVIL" in code.co_names else "patched" if "_oeapatch_sglang_oea" in code.co_names else "unpatched")' "$file"
}
# stamp PYC SRC: the pyc's header records SRC's mtime and size (a fixed-mtime build).
stamp() {
	"$py" -c '
import os, struct, sys
st = os.stat(sys.argv[2])
with open(sys.argv[1], "r+b") as f:
    f.seek(8)
    f.write(struct.pack("<II", int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF))' "$1" "$2"
}

site=$work/site
moe=$site/$rel
t=$moe/topk.py
b=$moe/_oeapatch_sglang_oea.py
site "$site"
cp "$t" "$work/original.py"
tag=$("$py" -c 'import sys; print(sys.implementation.cache_tag)')
ext=$("$py" -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')

echo "== 8. --python in the server's environment: PYTHONPATH"
check "the interpreter finds the site only through PYTHONPATH" \
	test "$(PYTHONPATH=$site "$py" -c 'import importlib.util; print(importlib.util.find_spec("sglang").submodule_search_locations[0])')" = "$site/sglang"
expect "PYTHONPATH=SITE apply --python (the server's PYTHONPATH finds it)" 0 \
	env PYTHONPATH="$site" "$OEAPATCH" apply --python "$py" --library "$OEA_LIBRARY"
has "the python: line says which PYTHONPATH" "PYTHONPATH=$site (from this environment)"
has "the target is the site's" "target $t"
expect "verify --python with it" 0 env PYTHONPATH="$site" "$OEAPATCH" verify --python "$py"
has "import:target holds, by the interpreter" "ok   import:target          sglang.srt.layers.moe.topk resolves to $t (asked $py"
expect "verify --python --json" 0 env PYTHONPATH="$site" "$OEAPATCH" verify --python "$py" --json
has "the JSON names the PYTHONPATH" "\"pythonpath\": \"$site\""
# the caller's current folder is not the server's
mkdir -p "$work/cwd"
site "$work/cwd"
expect "verify --python from a folder holding another sglang" 0 \
	bash -c "cd '$work/cwd' && PYTHONPATH='$site' '$OEAPATCH' verify --python '$py'"
has "still the site's" "target $t"
# A venv with its own patched sglang; the server's PYTHONPATH names another.
if "$py" -m venv --without-pip "$work/venv" >"$work/venv.log" 2>&1; then
	vpy=$work/venv/bin/python
	vsite=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	site "$vsite"
	other=$work/other
	site "$other"
	expect "apply --python VENV" 0 "$OEAPATCH" apply --python "$vpy" --library "$OEA_LIBRARY"
	expect "verify --python VENV" 0 "$OEAPATCH" verify --python "$vpy"
	check "with PYTHONPATH=OTHER the interpreter imports the other, unpatched sglang" \
		test "$(PYTHONPATH=$other "$vpy" -c 'import importlib.util; print(importlib.util.find_spec("sglang").submodule_search_locations[0])')" = "$other/sglang"
	expect "PYTHONPATH=OTHER verify --python VENV: not applied (what the server imports)" 1 \
		env PYTHONPATH="$other" "$OEAPATCH" verify --python "$vpy"
	has "it checked the other one" "target $other/$rel/topk.py"
	has "and says it is not applied" "is NOT applied"
	printf 'PYTHONPATH=%s\n' "$other" >"$work/other.env"
	expect "verify --python VENV --env-file with PYTHONPATH=OTHER" 1 \
		"$OEAPATCH" verify --python "$vpy" --env-file "$work/other.env"
	has "the python: line names the file's PYTHONPATH" "PYTHONPATH=$other (from $work/other.env:1)"
	: >"$work/empty.env"
	expect "a shell's PYTHONPATH is not the server's: --env-file without one" 0 \
		env PYTHONPATH="$other" "$OEAPATCH" verify --python "$vpy" --env-file "$work/empty.env"
	has "PYTHONPATH unset, from the files" "PYTHONPATH unset (in the --env-file files)"
else
	bad "python3 -m venv failed" "$(cat "$work/venv.log")"
fi

server() { env PYTHONPATH="$site" "$OEAPATCH" "$@" --python "$py"; }
# The sections below start from an applied site however section 8 went.
expect "apply -C SITE" 0 "$OEAPATCH" apply -C "$site" --library "$OEA_LIBRARY"
expect "verify -C SITE" 0 "$OEAPATCH" verify -C "$site"

echo "== 3. an extension module beside the target or the binding"
for sfx in "$ext" .abi3.so .so; do
	touch "$moe/topk$sfx"
	check "the path finder picks topk$sfx" test "$(finds "$moe" topk)" = "$moe/topk$sfx"
	expect "verify --python with topk$sfx" 1 server verify
	has "import:target names it" "FAIL import:target          sglang.srt.layers.moe.topk: $py"
	has "the file and why" "imports $moe/topk$sfx (an extension module"
	expect "verify -C with topk$sfx" 1 "$OEAPATCH" verify -C "$site"
	has "the C rules name it" "the import system picks $moe/topk$sfx (an extension module"
	rm "$moe/topk$sfx"
done
touch "$moe/_oeapatch_sglang_oea$ext"
check "the path finder picks the binding's extension twin" \
	test "$(finds "$moe" _oeapatch_sglang_oea)" = "$moe/_oeapatch_sglang_oea$ext"
expect "verify --python with _oeapatch_sglang_oea$ext" 1 server verify
has "import:binding names it" "imports $moe/_oeapatch_sglang_oea$ext (an extension module"
expect "verify -C with it" 1 "$OEAPATCH" verify -C "$site"
has "import:binding by the C rules" "FAIL import:binding"
rm "$moe/_oeapatch_sglang_oea$ext"
expect "verify with nothing beside them" 0 server verify

echo "== 3b. apply holds to the same rule: nothing written under a shadow"
expect "revert -C SITE" 0 "$OEAPATCH" revert -C "$site"
cp "$t" "$work/unpatched.py"
for shadow in "topk$ext" topk/__init__.py; do
	mkdir -p "$(dirname "$moe/$shadow")"
	: >"$moe/$shadow"
	expect "apply --python with $shadow is refused" 2 server apply --library "$OEA_LIBRARY"
	has "it names the shadowing path" "imports $moe/$shadow ("
	has "and that nothing was written" "refusing, nothing written"
	expect "apply -C with $shadow is refused" 2 "$OEAPATCH" apply -C "$site" --library "$OEA_LIBRARY"
	has "by the C rules" "the import system picks $moe/$shadow ("
	check "the target is as it was" cmp -s "$work/unpatched.py" "$t"
	check "no binding module" test ! -e "$b"
	rm -rf "$moe/topk$ext" "$moe/topk"
done
expect "apply -C SITE with nothing beside it" 0 "$OEAPATCH" apply -C "$site" --library "$OEA_LIBRARY"

echo "== 4. a package folder beside the target or the binding"
mkdir "$moe/topk"
check "a folder without __init__ does not win" test "$(finds "$moe" topk)" = "$t"
expect "verify --python with it" 0 server verify
: >"$moe/topk/__init__.py"
check "with __init__.py the package wins" test "$(finds "$moe" topk)" = "$moe/topk/__init__.py"
expect "verify --python" 1 server verify
has "import:target names the package" "imports $moe/topk/__init__.py (a package folder"
expect "status --python" 1 server status
has "status names it" "import:target"
expect "verify -C" 1 "$OEAPATCH" verify -C "$site"
has "the C rules name it" "the import system picks $moe/topk/__init__.py (a package folder"
rm -r "$moe/topk"
mkdir "$moe/_oeapatch_sglang_oea"
: >"$moe/_oeapatch_sglang_oea/__init__.py"
check "the binding's package twin wins" test "$(finds "$moe" _oeapatch_sglang_oea)" = "$moe/_oeapatch_sglang_oea/__init__.py"
expect "verify --python" 1 server verify
has "import:binding names it" "imports $moe/_oeapatch_sglang_oea/__init__.py (a package folder"
expect "verify -C" 1 "$OEAPATCH" verify -C "$site"
expect "status -C" 1 "$OEAPATCH" status -C "$site"
rm -r "$moe/_oeapatch_sglang_oea"
# A package level without __init__ is a namespace portion: a module of the
# same name beside it (layers/moe.py) wins, and topk.py is never imported.
mv "$moe/__init__.py" "$work/moe-init.py"
check "without moe/__init__.py, the moe folder is still what the path finder takes" \
	test "$(finds "$site/sglang/srt/layers" moe)" = ""
expect "verify -C with moe/ a namespace portion and nothing beside it" 0 "$OEAPATCH" verify -C "$site"
: >"$site/sglang/srt/layers/moe.py"
check "the path finder picks layers/moe.py over the folder without __init__" \
	test "$(finds "$site/sglang/srt/layers" moe)" = "$site/sglang/srt/layers/moe.py"
expect "verify --python with layers/moe.py beside it" 1 server verify
has "the interpreter names the module that wins" "FAIL import:target"
expect "verify -C with layers/moe.py beside it" 1 "$OEAPATCH" verify -C "$site"
has "the C rules name the level and the module" "$site/sglang/srt/layers/moe has no __init__, so the module $site/sglang/srt/layers/moe.py beside it wins"
rm "$site/sglang/srt/layers/moe.py"
mv "$work/moe-init.py" "$moe/__init__.py"
expect "verify -C with moe/__init__.py back" 0 "$OEAPATCH" verify -C "$site"

echo "== 5. a __pycache__ others can write (umask 000), a pyc planted by another user"
(umask 000 && "$py" -c 'import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)' "$t")
pyc=$moe/__pycache__/topk.$tag.pyc
check "__pycache__ is 0777" test "$(stat -c %a "$moe/__pycache__")" = 777
expect "verify -C: the folder is open to others" 1 "$OEAPATCH" verify -C "$site"
has "trust:bytecode names __pycache__" "FAIL trust:bytecode         $moe/__pycache__ (owner uid 0 (root), mode 0777) is writable by others"
printf 'import os\nEVIL = "_oeapatch_sglang_oea"\n' >"$work/evil.py"
"$py" -c 'import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' "$work/evil.py" "$work/evil.pyc"
stamp "$work/evil.pyc" "$t"
chmod 644 "$work/evil.pyc"
if su nobody -s /bin/sh -c "rm -f '$pyc' && cat '$work/evil.pyc' > '$pyc'" 2>"$work/su.log"; then
	check "nobody replaced the pyc" cmp -s "$work/evil.pyc" "$pyc"
	check "the loader runs nobody's code" test "$(runs "$t")" = EVIL
	expect "verify -C" 1 "$OEAPATCH" verify -C "$site"
	has "the folder fails the trust rule" "FAIL trust:bytecode         $moe/__pycache__ (owner uid 0 (root), mode 0777)"
	chmod 755 "$moe/__pycache__"
	expect "verify -C with the folder fixed" 1 "$OEAPATCH" verify -C "$site"
	has "nobody's pyc fails it" "FAIL trust:bytecode         $pyc (owner uid 65534 (nobody)"
	chmod 777 "$moe/__pycache__"
	expect "verify --python" 1 server verify
	has "the interpreter compiled the source and compared" "FAIL bytecode               $pyc: timestamp bytecode whose recorded mtime and size equal the source's, compiled from other bytes (the interpreter compiled the source and compared)"
else
	bad "su nobody failed" "$(cat "$work/su.log")"
fi
# Root's own cache, the same bytes (a stale build): trusted, but the
# interpreter is not fooled by the name in it.
chmod 755 "$moe/__pycache__"
chown root:root "$pyc"
chmod 644 "$pyc"
expect "verify --python, a root-owned 0644 pyc of other code holding the name" 1 server verify
has "bytecode fails" "FAIL bytecode               $pyc"
has "trust:bytecode holds" "ok   trust:bytecode"
if [ -n "${vpy:-}" ]; then
	# The same in the venv, whose interpreter finds its package without PYTHONPATH.
	vt=$vsite/$rel/topk.py
	vpyc=$vsite/$rel/__pycache__/topk.$tag.pyc
	mkdir -p "$vsite/$rel/__pycache__"
	cp "$work/evil.pyc" "$vpyc"
	stamp "$vpyc" "$vt"
	check "the venv's loader runs the pyc holding the name" test "$(runs "$vt")" = EVIL
	expect "verify --python VENV: the name in the pyc does not fool the interpreter's comparison" 1 \
		"$OEAPATCH" verify --python "$vpy"
	has "bytecode names it" "FAIL bytecode               $vpyc: timestamp bytecode whose recorded mtime and size equal the source's, compiled from other bytes (the interpreter compiled the source and compared)"
	rm -rf "$vsite/$rel/__pycache__"
fi
"$py" -c 'import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)' "$t"
check "the pyc of the patched source" test "$(runs "$t")" = patched
expect "verify --python with the source's own timestamp pyc" 0 server verify
expect "verify -C with it" 0 "$OEAPATCH" verify -C "$site"
rm -rf "$moe/__pycache__"

echo "== 6. a sticky package folder"
chmod 1777 "$moe"
if su nobody -s /bin/sh -c "mkdir '$moe/topk' && : > '$moe/topk/__init__.py'" 2>"$work/su.log"; then
	check "nobody's package is imported instead" test "$(finds "$moe" topk)" = "$moe/topk/__init__.py"
	rm -r "$moe/topk"
else
	bad "su nobody failed" "$(cat "$work/su.log")"
fi
expect "verify -C with moe 1777" 1 "$OEAPATCH" verify -C "$site"
has "the folder is named" "FAIL trust:target           $moe (owner uid 0 (root), mode 1777) is writable by others (sticky, but the import system lists this folder"
expect "verify --python with it" 1 server verify
chmod 755 "$moe"
chmod 1777 "$site"
expect "site-packages 1777 (its .pth files)" 1 "$OEAPATCH" verify -C "$site"
has "site-packages is named" "$site (owner uid 0 (root), mode 1777) is writable by others (sticky"
chmod 755 "$site"
chmod 1777 "$work"
expect "a sticky folder above site-packages (like /tmp) still passes" 0 "$OEAPATCH" verify -C "$site"
chmod 755 "$work"

echo "== 7. PYTHONPYCACHEPREFIX"
prefix=$work/pycache-prefix
ppyc=$(PYTHONPYCACHEPREFIX=$prefix "$py" -c 'import importlib.util, sys; print(importlib.util.cache_from_source(sys.argv[1]))' "$t")
check "the prefix puts the target's bytecode under it" test "$ppyc" = "$prefix$moe/topk.$tag.pyc"
"$py" -c '
import py_compile, sys
py_compile.compile(sys.argv[1], cfile=sys.argv[2], dfile=sys.argv[3], doraise=True,
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)' "$work/original.py" "$ppyc" "$t"
check "with the prefix, the loader runs the pyc there: unpatched" test "$(runs "$t" PYTHONPYCACHEPREFIX="$prefix")" = unpatched
check "without it, the patched source" test "$(runs "$t")" = patched
expect "verify -C with PYTHONPYCACHEPREFIX" 1 env PYTHONPYCACHEPREFIX="$prefix" "$OEAPATCH" verify -C "$site"
has "bytecode names the pyc under the prefix" "FAIL bytecode               $ppyc: unchecked-hash bytecode"
printf 'PYTHONPYCACHEPREFIX=%s\n' "$prefix" >"$work/prefix.env"
expect "verify -C --env-file with it" 1 "$OEAPATCH" verify -C "$site" --env-file "$work/prefix.env"
has "the same pyc" "FAIL bytecode               $ppyc"
expect "verify --python with it" 1 env PYTHONPYCACHEPREFIX="$prefix" PYTHONPATH="$site" "$OEAPATCH" verify --python "$py"
has "the same pyc, by the interpreter's cache_from_source" "FAIL bytecode               $ppyc"
expect "verify -C without the prefix: not looked for" 0 "$OEAPATCH" verify -C "$site"
expect "apply with the prefix removes it" 0 env PYTHONPYCACHEPREFIX="$prefix" "$OEAPATCH" apply -C "$site"
has "and says so" "bytecode  removed $ppyc"
check "the loader runs the patched source" test "$(runs "$t" PYTHONPYCACHEPREFIX="$prefix")" = patched
chmod 1777 "$prefix"
expect "a prefix folder others can write (sticky or not)" 1 env PYTHONPYCACHEPREFIX="$prefix" "$OEAPATCH" verify -C "$site"
has "trust:bytecode names it" "FAIL trust:bytecode         $prefix (owner uid 0 (root), mode 1777) is writable by others"
chmod 755 "$prefix"
expect "a prefix of root's" 0 env PYTHONPYCACHEPREFIX="$prefix" "$OEAPATCH" verify -C "$site"
rm -rf "$prefix"
mkdir -m 1777 "$work/opentmp"
expect "a prefix still to be made in a sticky 1777 folder: others could make it first" 1 \
	env PYTHONPYCACHEPREFIX="$work/opentmp/pyc" "$OEAPATCH" verify -C "$site"
has "the folder it would be made in is named" "FAIL trust:bytecode         $work/opentmp (owner uid 0 (root), mode 1777)"
rmdir "$work/opentmp"

echo "== also: the binding module's timestamp pyc after a library change"
mkdir -p "$work/la" "$work/lb"
real=$(readlink -f "$OEA_LIBRARY")
cp "$real" "$work/la/liboea.so.3.0.0"
cp "$real" "$work/lb/liboea.so.3.0.0"
expect "apply --library A" 0 "$OEAPATCH" apply -C "$site" --library "$work/la/liboea.so.3.0.0"
bpyc=$moe/__pycache__/_oeapatch_sglang_oea.$tag.pyc
"$py" -c 'import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)' "$b"
cp "$bpyc" "$work/binding-a.pyc"
expect "apply --library B (same length: the module keeps its size)" 0 "$OEAPATCH" apply -C "$site" --library "$work/lb/liboea.so.3.0.0"
mkdir -p "$moe/__pycache__"
cp "$work/binding-a.pyc" "$bpyc"
stamp "$bpyc" "$b"
check "the loader runs the old binding (library A)" test "$("$py" -B -c '
import importlib.machinery, sys
code = importlib.machinery.SourceFileLoader("b", sys.argv[1]).get_code("b")
def consts(c):
    for k in c.co_consts:
        yield k
        if hasattr(k, "co_consts"): yield from consts(k)
print(any(isinstance(k, str) and "/la/" in k for k in consts(code)))' "$b")" = True
expect "verify -C" 1 "$OEAPATCH" verify -C "$site"
has "bytecode names the binding's pyc" "FAIL bytecode               $bpyc: timestamp bytecode"
expect "verify --python" 1 server verify
has "the interpreter compared it" "FAIL bytecode               $bpyc: timestamp bytecode whose recorded mtime and size equal the source's, compiled from other bytes (the interpreter"
expect "apply removes it" 0 "$OEAPATCH" apply -C "$site"
expect "verify" 0 "$OEAPATCH" verify -C "$site"

e2e_summary
