#!/usr/bin/python3
"""A bare library name: `oeapatch verify`, the binding and glibc's loader find
the same file.

Usage: /usr/bin/python3 tests/e2e/test_locate_crosscheck.py --library PATH/liboea.so [-v]

SGLANG_OEA_LIBRARY may be a bare file name ("liboea.so.2"), which the server's
dlopen searches for. Two implementations work out which file that is without
loading it (a library must pass the trust rule before any of its code runs):
src/libsearch.c (`verify`, `status`, `apply`: the file they check and judge)
and the binding's _locate() (the file it checks, then opens, at the server's
import). A green verify means something only when both name the file the
server's loader will open. For each arrangement of LD_LIBRARY_PATH and
folders built here, this test asks three parties:

  verify   `oeapatch verify --json` with SGLANG_OEA_LIBRARY=NAME and that
           LD_LIBRARY_PATH: the file its library check names, or its refusal;
  binding  _locate(NAME) of the binding module apply wrote, in this process
           with that LD_LIBRARY_PATH: the file, or OSError;
  loader   glibc itself: ctypes.CDLL(NAME) in a new interpreter with that
           LD_LIBRARY_PATH, and the file its link map records (dlinfo), or the
           file its error names (a file that is no ELF stops the search).

and requires: verify and the binding agree (both the same file, or both
refuse); where they name a file, it is the loader's. Where they refuse (an
entry relative to the server's working directory, a glibc-hwcaps, tls or
platform subfolder among which the loader picks by CPU features), the loader's
pick is printed, not compared: the refusal is the point.

Arrangements: the second of two folders; ':' and ';' separators; a first
folder holding a 32-bit ELF, a directory, a dangling link, a link to the
library, a file that is no ELF, a file of 10 bytes; glibc-hwcaps/x86-64-v2,
tls and platform subfolders; a relative entry and an empty one; a folder that
does not exist; a name only the loader cache (/etc/ld.so.cache) knows
(libz.so.1, Debian's zlib1g); a name found nowhere.
"""

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

from oea_testlib import VERBOSE, case, check, summary

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("OEAPATCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
OEAPATCH = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
ERA = os.path.join(ROOT, "tests", "fixtures", "eras", "2025-08_topk_config.py")
TARGET = "python/sglang/srt/layers/moe/topk.py"
MODULE = "_oeapatch_sglang_oea"
PREFIX = "SGLANG_OEA_"
NAME = "liboea-xcheck.so"

# In a new interpreter: which file glibc opens for argv[1] ("FILE path"), or
# the file its error names ("ERROR path: message"), or "ERROR: message".
LOADER = r"""
import ctypes, sys
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as exc:
    text = str(exc)
    print("ERROR " + text)
    sys.exit(0)
libc = ctypes.CDLL(None)
lm = ctypes.c_void_p()
if libc.dlinfo(ctypes.c_void_p(lib._handle), 2, ctypes.byref(lm)) != 0:  # RTLD_DI_LINKMAP
    print("ERROR dlinfo failed")
    sys.exit(0)
# struct link_map { ElfW(Addr) l_addr; char *l_name; ... }
name = ctypes.cast(lm.value + ctypes.sizeof(ctypes.c_void_p), ctypes.POINTER(ctypes.c_char_p))
print("FILE " + name.contents.value.decode())
"""


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(PREFIX) and k != "LD_LIBRARY_PATH"}
    env.update(extra)
    return env


def verify_says(root, name, ld_path):
    """(file or None, text) from verify's library check."""
    extra = {PREFIX + "LIBRARY": name}
    if ld_path is not None:
        extra["LD_LIBRARY_PATH"] = ld_path
    proc = subprocess.run([OEAPATCH, "verify", "-C", root, "--json"], capture_output=True,
                          text=True, env=clean_env(extra), timeout=60)
    doc = json.loads(proc.stdout)
    checks = [c for c in doc["checks"] if c["check"] == "library"]
    check(len(checks) == 1, "verify has no library check (exit %d): %r"
          % (proc.returncode, doc["checks"]))
    detail = checks[0]["detail"]
    # Found and loaded: "NAME (found ...: FILE) loads, ABI ..."; found, not
    # loadable: "FILE does not load: <dlopen's error>"; not found or
    # refused: "NAME does not load: a bare file name is searched ...".
    m = re.match(r"^%s \(found .*: (/\S+)\) loads" % re.escape(name), detail)
    if m:
        return m.group(1), detail
    m = re.match(r"^(/\S+) does not load: ", detail)
    if m:
        return m.group(1), detail
    return None, detail


def binding_says(module, name, ld_path):
    saved = os.environ.get("LD_LIBRARY_PATH")
    try:
        if ld_path is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = ld_path
        try:
            return module._locate(name), ""
        except OSError as exc:
            return None, str(exc)
    finally:
        if saved is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = saved


def loader_says(name, ld_path, cwd):
    extra = {} if ld_path is None else {"LD_LIBRARY_PATH": ld_path}
    proc = subprocess.run([sys.executable, "-c", LOADER, name], capture_output=True, text=True,
                          env=clean_env(extra), cwd=cwd, timeout=60)
    out = proc.stdout.strip()
    if out.startswith("FILE "):
        return out[5:]
    m = re.match(r"^ERROR (/[^:]+): ", out)
    return ("error in " + m.group(1)) if m else (out or proc.stderr.strip()[-300:])


def same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


def elf32(src, dst):
    """A copy of `src` marked ELFCLASS32: an ELF the loader skips for its class."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    data[4] = 1
    with open(dst, "wb") as f:
        f.write(data)


def arrangements(top, library):
    """[(name, LD_LIBRARY_PATH or None, the library's name, cwd)]."""
    def folder(rel):
        path = os.path.join(top, rel)
        os.makedirs(path, exist_ok=True)
        return path

    def put(rel):
        path = os.path.join(top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copyfile(library, path)
        return path

    good = os.path.dirname(put("good/" + NAME))
    empty = folder("empty")
    cwd = folder("cwd")
    put("cwd/rel/" + NAME)
    out = [("the second of two folders", "%s:%s" % (empty, good), NAME, cwd),
           ("';' as the separator", "%s;%s" % (empty, good), NAME, cwd),
           ("a folder that does not exist first", "%s:%s" % (os.path.join(top, "nowhere"), good),
            NAME, cwd)]
    d = folder("elf32")
    elf32(library, os.path.join(d, NAME))
    out.append(("a 32-bit ELF of that name first", "%s:%s" % (d, good), NAME, cwd))
    d = folder("dir")
    os.makedirs(os.path.join(d, NAME))
    out.append(("a directory of that name first", "%s:%s" % (d, good), NAME, cwd))
    d = folder("dangling")
    os.symlink(os.path.join(top, "missing.so"), os.path.join(d, NAME))
    out.append(("a dangling link of that name first", "%s:%s" % (d, good), NAME, cwd))
    d = folder("link")
    os.symlink(os.path.join(good, NAME), os.path.join(d, NAME))
    out.append(("a link to the library first", "%s:%s" % (d, good), NAME, cwd))
    d = folder("text")
    with open(os.path.join(d, NAME), "w") as f:
        f.write("not a library, but longer than an ELF header's first 20 bytes\n")
    out.append(("a file that is no ELF first (the loader stops on it)", "%s:%s" % (d, good),
                NAME, cwd))
    d = folder("short")
    with open(os.path.join(d, NAME), "wb") as f:
        f.write(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    out.append(("a 10-byte file first (the loader stops on it)", "%s:%s" % (d, good), NAME, cwd))
    for sub in ("glibc-hwcaps/x86-64-v2" if platform.machine() == "x86_64"
                else "glibc-hwcaps/power10", "tls", platform.machine()):
        d = folder("sub-" + sub.replace("/", "-"))
        put(os.path.join(os.path.basename(d), sub, NAME))
        put(os.path.join(os.path.basename(d), NAME))
        out.append(("a %s subfolder beside the library" % sub, "%s:%s" % (d, good), NAME, cwd))
    out.append(("a relative entry first", "rel:%s" % good, NAME, cwd))
    out.append(("an empty entry first", ":%s" % good, NAME, cwd))
    out.append(("no LD_LIBRARY_PATH: a name the loader cache knows", None, "libz.so.1", cwd))
    out.append(("a name found nowhere", "%s:%s" % (empty, good), "liboea-nowhere.so", cwd))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.v
    library = os.path.realpath(args.library)

    with tempfile.TemporaryDirectory(prefix="oeapatch-locate-") as tmp:
        os.chmod(tmp, 0o755)
        root = os.path.join(tmp, "checkout")
        os.makedirs(os.path.join(root, os.path.dirname(TARGET)))
        shutil.copyfile(ERA, os.path.join(root, TARGET))
        proc = subprocess.run([OEAPATCH, "apply", "-C", root, "--library", library],
                              env=clean_env({}), capture_output=True, text=True)
        if proc.returncode != 0:
            print("FAIL apply: exit %d: %s" % (proc.returncode, proc.stderr))
            return 1
        moe = os.path.join(root, os.path.dirname(TARGET))
        spec = importlib.util.spec_from_file_location(MODULE, os.path.join(moe, MODULE + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # OEA off: nothing is loaded at import
        top = os.path.join(tmp, "t")
        found = refused = 0
        for what, ld_path, name, cwd in arrangements(top, library):
            @case(what)
            def same():
                nonlocal found, refused
                c, c_text = verify_says(root, name, ld_path)
                py, py_text = binding_says(module, name, ld_path)
                real = loader_says(name, ld_path, cwd)
                check((c is None) == (py is None),
                      "verify: %s\n  binding: %s" % (c or c_text, py or py_text))
                if c is None:
                    refused += 1
                    return "both refuse; the loader: %s" % real.replace(tmp, "")
                check(c == py, "verify found %s, the binding %s" % (c, py))
                loaded = real[len("error in "):] if real.startswith("error in ") else real
                check(same_file(c, loaded), "both found %s, the loader opened %s" % (c, real))
                found += 1
                return "all three: %s" % c.replace(tmp, "")
            same()

        @case("the arrangements hold both outcomes")
        def both():
            check(found >= 8 and refused >= 5, "%d found, %d refused" % (found, refused))
        both()

    return summary()


if __name__ == "__main__":
    sys.exit(main())
