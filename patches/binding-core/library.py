# ------------------------------------------------------------------ liboea
# (patches/binding-core/library.py) the C ABI's mirrors; finding, trusting,
# loading and checking liboea; turning OEA on at import.

# True when the call site must call route(): K0 > 0 (route() then checks the
# ranks once, and with a library that could not be loaded, non-strict, leaves
# every batch alone).
ENABLED = False
_lib = None
_has_cuda = False
DISABLED_REASON = None

# ---------------------------------------------------------------- the C ABI

OEA_OK = 0
# OEA_FLAG_COUNT_ONLY (liboea 3.1.0): the call's figures without its writes,
# shadow mode's calls; PROBLEM_PROBE holds it, so a library without it is
# refused at import, as verify refuses it
_FLAG_COUNT_ONLY = 0x2
_DTYPE_F32, _DTYPE_BF16, _DTYPE_F16, _DTYPE_I32, _DTYPE_I64 = 0, 1, 2, 3, 4
_SCORING = {"softmax": 0, "sigmoid": 1}

OeaStats = None
OeaProblem = None
OeaTotals = None


def _declare_structs():
    """ctypes mirrors of oea_stats, oea_totals and oea_problem (ABI 3), field for
    field. oea_totals holds the running sums a call adds to when the problem's
    totals points at them (docs/oea-semantics.md, rules 9-10: T sums, the kept
    weight and changed slots of re-routed rows, the kept histogram); this module
    does not pass them yet (totals stays NULL)."""
    global OeaStats, OeaProblem, OeaTotals
    import ctypes

    u32, i32, i64, ptr = ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p

    class _Stats(ctypes.Structure):
        _fields_ = [("t_before", u32), ("t_after", u32), ("valid_rows", u32),
                    ("invalid_rows", u32), ("nonfinite_rows", u32), ("gated", u32),
                    ("reserved", u32 * 2)]

    class _Totals(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint64) for name in (
            "calls", "gated", "t_before", "t_after", "valid_rows", "invalid_rows",
            "nonfinite_rows", "rerouted_rows", "changed_slots", "kept_fx",
            "kept_undefined")] + [("kept_hist", ctypes.c_uint64 * 16)]

    class _Problem(ctypes.Structure):
        _fields_ = [
            ("struct_size", u32), ("flags", u32), ("n", i32), ("num_experts", i32),
            ("top_k", i32), ("num_shared", i32), ("k0", i32), ("scoring", i32),
            ("renormalize", i32), ("num_expert_group", i32), ("topk_group", i32),
            ("logits_dtype", i32), ("logits_row_stride", i64), ("logits", ptr),
            ("correction_bias", ptr), ("ids_dtype", i32), ("weights_dtype", i32),
            ("ids_row_stride", i64), ("weights_row_stride", i64), ("ids", ptr),
            ("weights", ptr), ("num_valid_rows", ptr), ("stats", ptr),
            ("min_valid_rows", i32), ("reserved_abi2", i32), ("totals", ptr),
        ]

    _Stats.__name__ = _Stats.__qualname__ = "OeaStats"
    _Totals.__name__ = _Totals.__qualname__ = "OeaTotals"
    _Problem.__name__ = _Problem.__qualname__ = "OeaProblem"
    OeaStats, OeaProblem, OeaTotals = _Stats, _Problem, _Totals


def library_path_problem(path):
    """Why `path` is no library this module loads, or None.

    An absolute path, or a bare file name that the loader's search path finds
    (LD_LIBRARY_PATH, the loader cache), as ctypes.CDLL and dlopen read them.
    A relative path with a slash would be opened from this process's working
    directory, which `oeapatch verify` cannot know: refused.
    """
    if "/" in path and not path.startswith("/"):
        return ("%r is a relative path: it would be opened from the server's working "
                "directory, which `oeapatch verify` cannot check; give an absolute path, or a "
                "bare file name that the loader's search path finds (LD_LIBRARY_PATH, the "
                "loader cache)" % path)
    return None


def load_library(path):
    """Open liboea at `path`, declare its functions and check it as this module uses it:
    the path rule (library_path_problem), the trust rule (trust_problem, with
    {{env_prefix}}ALLOW_UNTRUSTED a warning), LIBRARY_SYMBOLS exported,
    ABI_VERSION, and PROBLEM_PROBE accepted by oea_problem_check.

    Returns the ctypes handle; raises OSError or RuntimeError with the reason.
    """
    import ctypes

    # The path rule first: a relative path would be walked by the trust rule
    # from this process's working directory, and the answer (a missing file,
    # or a trust failure that the escape would let through) would hide the
    # reason it can never be used.
    problem = library_path_problem(path)
    if problem:
        raise OSError(problem)
    # Trusted before it is loaded (loading runs its constructors): a bare name
    # is first found the way the loader will find it (_locate), and that file
    # is checked and then opened.
    if "/" not in path:
        path = _locate(path)
    _check_trust(path)
    if OeaProblem is None:
        _declare_structs()
    if ctypes.sizeof(OeaProblem) != PROBLEM_SIZE:
        raise RuntimeError("this module's oea_problem is %d bytes, its patch definition declares %d"
                           % (ctypes.sizeof(OeaProblem), PROBLEM_SIZE))
    lib = ctypes.CDLL(path)
    missing = [name for name in LIBRARY_SYMBOLS if not hasattr(lib, name)]
    if missing:
        raise RuntimeError("does not export %s, which this module calls (not a liboea of ABI %d)"
                           % (", ".join(missing), ABI_VERSION))
    c_int, ptr = ctypes.c_int, ctypes.c_void_p
    for name, args, result in (("oea_abi_version", [], c_int),
                               ("oea_status_message", [c_int], ctypes.c_char_p),
                               ("oea_has_cuda", [], c_int), ("oea_problem_check", [ptr], c_int),
                               ("oea_route_host", [ptr], c_int),
                               ("oea_route_cuda", [ptr, ptr], c_int)):
        getattr(lib, name).argtypes, getattr(lib, name).restype = args, result
    abi = lib.oea_abi_version()
    if abi != ABI_VERSION:
        raise RuntimeError(
            "ABI version %d, but this binding was written for ABI %d "
            "(re-run `oeapatch apply` with the matching liboea)" % (abi, ABI_VERSION)
        )
    # The library must accept our struct as the ABI says it is laid out.
    probe = OeaProblem(struct_size=PROBLEM_SIZE, **PROBLEM_PROBE)
    status = lib.oea_problem_check(ctypes.addressof(probe))
    if status != OEA_OK:
        raise RuntimeError(
            "refuses this binding's argument block (oea_problem of %d bytes, ABI %d): "
            "oea_problem_check returns %d (%s)"
            % (PROBLEM_SIZE, ABI_VERSION, status, _message(lib, status))
        )
    return lib


# ------------------------------------------------------------------ trust
# the trust rule, and where dlopen finds a bare name.

# The rule `oeapatch verify` applies (src/trust.c; docs/security.md states it
# once, tests/e2e/test_trust_crosscheck.py holds the two to the same
# verdicts): the file and every directory from it up to the root are owned by
# root or the target's owner and writable by neither group nor others, but a
# sticky directory (/tmp) may be, since the entry below it is checked in
# turn. Links are followed a component at a time, each step checked, and a
# link must be owned by root or the target's owner.
_MAX_LINKS = 40


def _owner_text(uid):
    try:
        import pwd
        return "uid %d (%s)" % (uid, pwd.getpwuid(uid).pw_name)
    except (ImportError, KeyError):
        return "uid %d" % uid


def _shell_word(path):
    plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-"
    if path and all(ch in plain for ch in path):
        return path
    return "'" + path.replace("'", "'\\''") + "'"


def _offence(path, st, owner):
    import stat as st_
    mode = st.st_mode & 0o7777
    head = "%s (owner %s, mode %04o)" % (path, _owner_text(st.st_uid), mode)
    if st.st_uid != 0 and st.st_uid != owner:
        return ("%s is owned by neither root nor the target's owner (%s), so its owner can "
                "replace what the server loads: `chown root %s`"
                % (head, _owner_text(owner), _shell_word(path)))
    if st_.S_ISLNK(st.st_mode) or (st_.S_ISDIR(st.st_mode) and st.st_mode & st_.S_ISVTX):
        return None
    if st.st_mode & st_.S_IWOTH:
        return "%s is writable by others: `chmod go-w %s`" % (head, _shell_word(path))
    if st.st_mode & st_.S_IWGRP:
        return "%s is writable by its group: `chmod go-w %s`" % (head, _shell_word(path))
    return None


def trust_problem(path, owner):
    """None when `path` passes the trust rule for a target owned by `owner`;
    else (offending path, message). Raises OSError when it cannot be walked."""
    import stat as st_
    rest = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    problem = _offence("/", os.lstat("/"), owner)
    if problem:
        return "/", problem
    cur, links = "", 0
    parts = rest.split("/")
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            cur = cur.rsplit("/", 1)[0] if "/" in cur else ""
            continue
        step = cur + "/" + name
        st = os.lstat(step)
        problem = _offence(step, st, owner)
        if problem:
            return step, problem
        if st_.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise OSError("%s: too many levels of symbolic links" % step)
            target = os.readlink(step)
            parts = target.split("/") + parts
            if target.startswith("/"):
                cur = ""
            continue
        if parts and not st_.S_ISDIR(st.st_mode):
            raise OSError("%s: not a directory" % step)
        cur = step
    return None


def _target_owner():
    """The owner of the target this module sits beside (the adapter's
    TARGET_FILE), whoever decides what the server runs; this module's own
    owner when it is gone."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, TARGET_FILE), os.path.abspath(__file__)):
        try:
            return os.stat(path).st_uid
        except OSError:
            pass
    return 0


# Where dlopen finds a bare file name, worked out without loading anything:
# the search oeapatch's src/libsearch.c does for `verify` (the directories of
# LD_LIBRARY_PATH, the loader cache, the system directories; a folder whose
# glibc-hwcaps, tls or platform subfolders hold the name is refused, since the
# loader would choose among them by the CPU's features).
_CACHE_FLAGS = {"x86_64": 0x0303, "aarch64": 0x0a03}
_SYSTEM_DIRS = {"x86_64": ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"),
                "aarch64": ("/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")}
_LEGACY = ("x86_64", "haswell", "xeon_phi", "avx512_1")


def _elf_ok(path):
    """An ELF file of this process's class, byte order and machine, or what is
    no ELF at all (a directory, a text file: the loader stops on it: found,
    and loading says why); not what is missing or cannot be opened, nor an
    ELF of another class or machine (the loader passes those by)."""
    import sys

    if not os.path.exists(path):
        return False
    if not os.path.isfile(path):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(20)
        with open(sys.executable, "rb") as f:
            mine = f.read(20)
    except OSError:
        return False
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return True
    return len(mine) < 20 or (head[4:6] == mine[4:6] and head[18:20] == mine[18:20])


def _in_subfolder(folder, name):
    import platform

    for sub in ("glibc-hwcaps", "tls"):
        base = os.path.join(folder, sub)
        if _elf_ok(os.path.join(base, name)):
            return True
        try:
            entries = os.listdir(base)
        except OSError:
            entries = ()
        if any(_elf_ok(os.path.join(base, e, name)) for e in entries if not e.startswith(".")):
            return True
    return any(_elf_ok(os.path.join(folder, sub, name)) for sub in (platform.machine(),) + _LEGACY)


def _from_cache(name):
    """(file, ambiguous) from /etc/ld.so.cache (glibc's new format)."""
    import platform
    import struct

    try:
        with open("/etc/ld.so.cache", "rb") as f:
            data = f.read()
    except OSError:
        return None, False
    base = 0
    if data.startswith(b"ld.so-1.7.0"):
        base = (16 + struct.unpack_from("<I", data, 12)[0] * 12 + 7) & ~7
    if data[base:base + 20] != b"glibc-ld.so.cache1.1":
        return None, False
    want = _CACHE_FLAGS.get(platform.machine(), 0x0003)
    nlibs = struct.unpack_from("<I", data, base + 20)[0]
    found, ambiguous, key_wanted = None, False, name.encode()
    for i in range(nlibs):
        at = base + 48 + i * 24
        if at + 24 > len(data):
            break
        flags, key, value, _, hwcap = struct.unpack_from("<iIIIQ", data, at)
        if flags != want:
            continue
        k = data[base + key:data.index(b"\0", base + key)]
        if k != key_wanted:
            continue
        if hwcap:
            ambiguous = True
        elif found is None:
            found = os.fsdecode(data[base + value:data.index(b"\0", base + value)])
    return found, ambiguous


def _locate(name):
    """The file dlopen would open for the bare file name `name` in this
    process; raises OSError naming what was searched when none."""
    import platform
    import re

    subfolders = ("%s has a glibc-hwcaps, tls or platform subfolder holding %s: the loader "
                  "picks among them by the CPU's features; give {{env_prefix}}LIBRARY an "
                  "absolute path")
    value = os.environ.get("LD_LIBRARY_PATH", "")
    for folder in (re.split("[:;]", value) if value else ()):
        # an empty entry (a leading, doubled or trailing separator) is the
        # working directory to the loader, like a relative one
        if not folder.startswith("/"):
            raise OSError("LD_LIBRARY_PATH has the %s entry %r, searched from the working "
                          "directory: give {{env_prefix}}LIBRARY an absolute path"
                          % ("relative" if folder else "empty", folder))
        if _in_subfolder(folder, name):
            raise OSError(subfolders % (folder, name))
        if _elf_ok(os.path.join(folder, name)):
            return os.path.join(folder, name)
    found, ambiguous = _from_cache(name)
    if found:
        return found
    if ambiguous:
        raise OSError("the loader cache lists %s only for CPU feature levels (glibc-hwcaps): give "
                      "{{env_prefix}}LIBRARY an absolute path" % name)
    for folder in _SYSTEM_DIRS.get(platform.machine(), ()) + ("/lib64", "/usr/lib64", "/lib",
                                                              "/usr/lib"):
        if _in_subfolder(folder, name):
            raise OSError(subfolders % (folder, name))
        if _elf_ok(os.path.join(folder, name)):
            return os.path.join(folder, name)
    raise OSError("%s: not found where the loader searches (LD_LIBRARY_PATH=%r, the loader cache, "
                  "the system directories)" % (name, os.environ.get("LD_LIBRARY_PATH", "")))


def _check_trust(path):
    """Raises OSError when the library at `path` fails the trust rule (a
    warning instead with {{env_prefix}}ALLOW_UNTRUSTED)."""
    found = trust_problem(path, _target_owner())
    if found is None:
        return
    text = ("%s; whoever can change it can run code in this server (`man oeapatch`, "
            "SECURITY)" % found[1])
    if ALLOW_UNTRUSTED:
        logger.warning("oeapatch: liboea %s; loaded anyway: {{env_prefix}}ALLOW_UNTRUSTED=true", text)
        return
    raise OSError("refused: " + text + " (a development tree may set {{env_prefix}}ALLOW_UNTRUSTED=true)")


def _message(lib, status):
    text = lib.oea_status_message(int(status))
    return text.decode("utf-8", "replace") if text else "status %d" % status


def _enable():
    global ENABLED, _lib, _has_cuda, DISABLED_REASON
    ENABLED = True
    try:
        if not LIBRARY:
            raise OSError("no library path recorded and {{env_prefix}}LIBRARY is not set")
        lib = load_library(LIBRARY)
    except (OSError, RuntimeError) as exc:
        text = "oeapatch: {{env_prefix}}K0=%d, but liboea at %r is unusable: %s" % (
            K0, LIBRARY, exc)
        if STRICT:
            raise ImportError(text + " (set {{env_prefix}}STRICT=false to run without "
                              "OEA instead)") from exc
        DISABLED_REASON = "liboea unusable: %s" % exc
        logger.warning("%s; OEA routing is OFF on this process ({{env_prefix}}STRICT=false)",
                       text)
        return
    _lib = lib
    _has_cuda = bool(lib.oea_has_cuda())
