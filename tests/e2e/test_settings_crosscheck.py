#!/usr/bin/python3
"""The binding and `oeapatch verify` give the same verdict on every setting value.

Usage: /usr/bin/python3 tests/e2e/test_settings_crosscheck.py --library PATH/liboea.so [-v]

Two implementations read a definition's settings (SGLANG_OEA_* for SGLang): the binding module's
parse_settings() (Python, at the server's import) and `oeapatch verify` (C,
from the [setting:...] rules of patch.ini, before the start). A pre-start gate
is worth something only when they agree, so this test:

- applies the patch to a fixture checkout with the CLI and imports the binding
  module it wrote (not the template), with the system python3; with
  SGLANG_OEA_K0 unset it must load neither torch nor ctypes;
- requires that the <prefix>* names the written binding reads are exactly the
  [setting:...] sections of patch.ini (a setting added to one only fails here);
- runs every value of VALUES for every setting through parse_settings({NAME:
  value}) and through `oeapatch verify --json`, once from the environment and
  once from a systemd EnvironmentFile (--env-file), and requires the same
  verdict (verify's problems that say the binding refuses the value) and,
  when valid, the same effective value;
- imports the module under each of those environments and requires verify's
  settings.effective to be what the import runs with: its SETTINGS when the
  import goes on (every default when K0 is off and a value bad), and no value
  (null) for the variable the import stops on;
- checks the off/on leniency against the real import: with SGLANG_OEA_K0 valid
  and 0 a bad value is a warning (the import goes on), otherwise a failure (the
  import stops), for the same environments, with the same effective values.

Prints one line per case, then `N passed, M failed`; exit 1 on any failure.
"""

import argparse
import configparser
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile

from oea_testlib import RESULTS, VERBOSE, case, check, summary

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("OEAPATCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
OEAPATCH = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
# The definition under test and a target file it lands on (--definition,
# --fixture; tests/CMakeLists.txt runs this once per bundled definition): its
# target, binding module and settings prefix are read from its patch.ini.
DEFINITION = os.path.join(ROOT, "patches", "sglang-oea")
ERA = os.path.join(ROOT, "tests", "fixtures", "eras", "2025-08_topk_config.py")
TARGET = MODULE = PREFIX = None


def read_definition(directory):
    """(target, module, env_prefix) of a definition's patch.ini."""
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    with open(os.path.join(directory, "patch.ini"), encoding="utf-8") as f:
        ini.read_file(f)
    return (ini["patch"]["target"].split()[0], ini["binding"]["module"].strip(),
            ini["binding"]["env_prefix"].strip())


def S(name):
    """The definition's variable for a setting: S("K0") is SGLANG_OEA_K0 for SGLang."""
    return PREFIX + name

# Valid, invalid and edge values; each is tried for every setting.
VALUES = [
    "", " ", "\t", "0", "1", "2", "3", " 3 ", "\t3\n", "+3", "-3", "03", "007", "-0", "+0",
    "3.0", "3e0", "0x3", "0b1", "1_0", "3 4", "three", "abc", "-", "+", "2147483647",
    "2147483648", "-2147483648", "-2147483649", "99999999999999999999999", "1024", "1025",
    "\u0663", "\uff13", "3\u00a0", "\u00a03", "TRUE", "True", "true", "Yes", "y", "N", "no",
    "FALSE", "off", "on", "t", "/opt/liboea.so", "  /opt/liboea.so  ", "caf\u00e9", "\udcff3",
    "15", "16",  # K0: a warning (a no-op on top-8 models), refused (beyond liboea's top-k)
    "shadow", " Shadow\t", "SHADOW", "shadows", "sha dow", "ON", "\u0131n",  # MODE (a choice)
    # K0 bands (src/k0bands.c's rule, the binding's _k0_bands)
    "1-7:0,8-31:4,32-:3", " 1-:3 ", "1-:0", "1-31:0,32-:0", "1-7:0,8-:15", "1-7:0,8-:16",
    "2-7:0,8-:3", "1-7:0,9-:3", "1-7:0,8-31:4", "1-7:0,,8-:3", "1-:3,", "1-7:0 ,8-:3",
    "1-7:+2,8-:3", "1-7:0,8-:3 4", ":3", "1-0:3,1-:2", "1-7:0,8-:\u0663", "01-7:0,008-:3",
    "1-1048576:2,1048577-:3", "1-:99999999999999999999",
]


def environment_without_settings():
    return {k: v for k, v in os.environ.items() if not k.upper().startswith(PREFIX)}


def settings_of_definition():
    """[(NAME, type, key)] of patch.ini, read with Python's own INI parser."""
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    with open(os.path.join(DEFINITION, "patch.ini"), encoding="utf-8") as f:
        ini.read_file(f)
    out = []
    for section in ini.sections():
        if section.startswith("setting:"):
            name = section[len("setting:"):]
            key = ini[section].get("key", name[len(PREFIX):].lower())
            out.append((name, ini[section]["type"], key))
    return out


def systemd_double_quoted(value):
    """VALUE as a systemd EnvironmentFile double-quoted value (systemd.exec(5))."""
    return '"' + re.sub(r'(["\\`$])', r"\\\1", value) + '"'


class Verify:
    def __init__(self, checkout):
        self.checkout = checkout
        self.runs = 0

    def run(self, env=None, env_file_text=None, tmp=None):
        """(exit code, JSON document) of `oeapatch verify --json`."""
        args = [OEAPATCH, "verify", "-C", self.checkout, "--patch", DEFINITION, "--json"]
        child = environment_without_settings()
        if env_file_text is not None:
            path = os.path.join(tmp, "settings.env")
            with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
                f.write(env_file_text)
            args += ["--env-file", path]
        else:
            child.update(env or {})
        self.runs += 1
        proc = subprocess.run(args, env=child, capture_output=True, timeout=60)
        try:
            doc = json.loads(proc.stdout.decode("utf-8"))
        except ValueError:
            raise AssertionError("verify printed no JSON (exit %d): %r %r"
                                 % (proc.returncode, proc.stdout[:300], proc.stderr[:300]))
        return proc.returncode, doc


def verify_verdict(doc):
    """('bad', None) when verify reports a value the binding refuses (only one variable
    is set: a value can also break a cross rule, reported on the other setting), else
    ('ok', effective). Advice on a value the binding takes (a warning) is no refusal."""
    settings = doc.get("settings")
    check(settings is not None, "no settings in verify's JSON: %r" % (doc,))
    if any(p["refused"] for p in settings["problems"]):
        return "bad", None
    return "ok", settings["effective"]


def shown(value):
    """How verify shows a value that is not UTF-8 (settings.c, oeap_settings_quote)."""
    out = ""
    for ch in value:
        if "\udc80" <= ch <= "\udcff":
            out += "\\x%02x" % (ord(ch) - 0xdc00)
        elif ch in "\\'":
            out += "\\" + ch
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out += "\\x%02x" % ord(ch)
        else:
            out += ch
    return "'" + out + "'"


def same_value(parsed, effective):
    if isinstance(parsed, str) and any("\udc80" <= ch <= "\udcff" for ch in parsed):
        return shown(parsed) == effective  # JSON strings are UTF-8: verify escapes the rest
    return parsed == effective


def effective_disagreement(imported, effective):
    """What verify's settings.effective gets wrong about what the import runs with
    (imported: ('on', SETTINGS) or ('stop', the variable it stopped on)), or None."""
    how, what = imported
    if how == "on":
        if set(what) != set(effective):
            return "keys: import %s, verify %s" % (sorted(what), sorted(effective))
        wrong = {k: (what[k], effective[k]) for k in what if not same_value(what[k], effective[k])}
        return "import runs with, verify shows: %r" % wrong if wrong else None
    key = what[len(PREFIX):].lower()
    if effective.get(key, "missing") is not None:
        return "the import stops on %s, verify shows %s=%r (a value it never runs with)" % (
            what, key, effective.get(key, "missing"))
    return None


def import_verdict(moe, env):
    """('on', SETTINGS) when the module imports under `env`, ('stop', NAME) when the
    import stops on a SGLANG_OEA_* variable NAME (its SettingError names it first)."""
    try:
        return "on", dict(load_module(moe, env).SETTINGS)
    except Exception as exc:  # each import has its own SettingError class
        check(type(exc).__name__ == "SettingError", "%r: the import failed otherwise: %r" % (env, exc))
        m = re.match(r"(%s[A-Z0-9_]+)=" % PREFIX, str(exc))
        check(m is not None, "%r: the import stopped without naming a variable: %s" % (env, exc))
        return "stop", m.group(1)


def binding_verdict(module, name, value):
    try:
        return "ok", module.parse_settings({name: value})
    except module.SettingError:
        return "bad", None


_CODE = {}  # path -> the module's code object: compiled once, run for every import


def load_module(directory, env):
    """Imports the written binding module under `env` (os.environ patched for the import).

    What exec_module does (a fresh module, its code run in it), with the code
    compiled once: the test imports it several hundred times, and without a
    bytecode cache (PYTHONDONTWRITEBYTECODE) each compile costs more than the run."""
    path = os.path.join(directory, MODULE + ".py")
    if path not in _CODE:
        with open(path, "rb") as f:
            _CODE[path] = compile(f.read(), path, "exec")
    saved = dict(os.environ)
    try:
        for k in list(os.environ):
            if k.upper().startswith(PREFIX):
                del os.environ[k]
        os.environ.update(env)
        spec = importlib.util.spec_from_file_location(MODULE, path)
        module = importlib.util.module_from_spec(spec)
        exec(_CODE[path], module.__dict__)
        return module
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main():
    global DEFINITION, TARGET, MODULE, PREFIX
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("--definition", default=DEFINITION)
    ap.add_argument("--fixture", default=ERA, help="a target file the definition lands on")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    DEFINITION = os.path.abspath(args.definition)
    TARGET, MODULE, PREFIX = read_definition(DEFINITION)
    VERBOSE[0] = args.v
    logging.basicConfig(level=logging.ERROR)

    with tempfile.TemporaryDirectory(prefix="oeapatch-settings-") as tmp:
        checkout = os.path.join(tmp, "checkout")
        os.makedirs(os.path.join(checkout, os.path.dirname(TARGET)))
        with open(args.fixture, "rb") as src, open(os.path.join(checkout, TARGET), "wb") as dst:
            dst.write(src.read())
        proc = subprocess.run([OEAPATCH, "apply", "-C", checkout, "--patch", DEFINITION,
                               "--library", args.library],
                              env=environment_without_settings(), capture_output=True, text=True)
        if proc.returncode != 0:
            print("FAIL apply: exit %d: %s" % (proc.returncode, proc.stderr))
            return 1
        moe = os.path.join(checkout, os.path.dirname(TARGET))
        written = os.path.join(moe, MODULE + ".py")
        verify = Verify(checkout)
        settings = settings_of_definition()

        @case("the written module imports with K0 unset, without torch or ctypes")
        def import_light():
            script = ("import sys; before = set(sys.modules); sys.path.insert(0, %r); import %s as m; "
                      "new = set(sys.modules) - before; print(sorted(n for n in new if n.split('.')[0] "
                      "in ('torch', 'ctypes', 'numpy')))" % (moe, MODULE))
            p = subprocess.run([sys.executable, "-c", script], env=environment_without_settings(),
                               capture_output=True, text=True, timeout=120)
            check(p.returncode == 0, "import failed: %s" % p.stderr)
            check(p.stdout.strip() == "[]", "K0 unset imported %s" % p.stdout.strip())

        @case("the binding reads exactly the settings patch.ini has rules for")
        def same_names():
            with open(written, encoding="utf-8") as f:
                read = set(re.findall(r'["\'](%s[A-Z0-9_]+)["\']' % PREFIX, f.read()))
            ruled = {name for name, _, _ in settings}
            check(read == ruled, "only in the binding: %s; only in patch.ini: %s"
                  % (sorted(read - ruled), sorted(ruled - read)))
            return "%d settings" % len(ruled)

        @case("oeapatch definition --json (the plugin's reader): every setting, patch.ini's type")
        def definition_types():
            p = subprocess.run([OEAPATCH, "--patch", DEFINITION, "--json", "definition"],
                               env=environment_without_settings(), capture_output=True, text=True,
                               timeout=60)
            check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-500:]))
            doc = json.loads(p.stdout)["settings"]
            got = [(s["name"], s["type"]) for s in doc]
            check(got == [(n, t) for n, t, _ in settings], "definition %s\npatch.ini  %s"
                  % (got, settings))
            # a choice's values and a bool's forced_by, as patch.ini says them
            ini = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
            with open(os.path.join(DEFINITION, "patch.ini"), encoding="utf-8") as f:
                ini.read_file(f)
            for s in doc:
                section = ini["setting:" + s["name"]]
                values = section.get("values")
                check(s["values"] == (values.split() if values else None) and
                      s["forced_by"] == section.get("forced_by"),
                      "%s: values %r, forced_by %r; patch.ini: %r, %r" % (
                          s["name"], s["values"], s["forced_by"], values, section.get("forced_by")))
            forced = ["%s by %s" % (s["name"], s["forced_by"]) for s in doc if s["forced_by"]]
            return "%d settings; %s" % (len(got), ", ".join(forced) or "none forced")

        import_light()
        same_names()
        definition_types()
        module = load_module(moe, {})
        check(module.K0 == 0, "K0 unset gave %r" % module.K0)

        for name, typ, key in settings:
            @case("%s: %d values, environment and EnvironmentFile, same verdicts and effective values"
                  % (name, len(VALUES)))
            def per_setting(name=name, key=key):
                agree = bad = 0
                mismatches = []
                for value in VALUES:
                    want, parsed = binding_verdict(module, name, value)
                    imported = import_verdict(moe, {name: value})
                    sources = [("env", dict(env={name: value}))]
                    if "\udcff" not in value:  # an EnvironmentFile is UTF-8
                        sources.append(("file", dict(env_file_text="# cross-check\n%s=%s\n" % (
                            name, systemd_double_quoted(value)), tmp=tmp)))
                    for label, kw in sources:
                        rc, doc = verify.run(**kw)
                        got, effective = verify_verdict(doc)
                        wrong = effective_disagreement(imported, doc["settings"]["effective"])
                        if wrong:
                            mismatches.append("%s %r: %s" % (label, value, wrong))
                        elif got != want:
                            mismatches.append("%s %r: binding %s, verify %s (exit %d)"
                                              % (label, value, want, got, rc))
                        elif got == "ok" and not same_value(parsed[key], effective[key]):
                            mismatches.append("%s %r: binding %r, verify %r"
                                              % (label, value, parsed[key], effective[key]))
                        else:
                            agree += 1
                    bad += want == "bad"
                check(not mismatches, "%d disagreements:\n  %s" % (len(mismatches), "\n  ".join(mismatches)))
                return "%d agreements, %d values refused" % (agree, bad)
            per_setting()

        # The forms of <prefix>LIBRARY: the binding's loader refuses a relative
        # path with a slash (library_path_problem), verify's settings check too.
        forms = ["lib/liboea.so", "./liboea.so", "../lib/liboea.so.2", " a/b ", "lib/",
                 "/opt/liboea.so", "liboea.so.2", " liboea.so ", "/"]

        @case(S("LIBRARY") + " forms with K0 on: the binding's loader and verify agree")
        def library_forms():
            refused = 0
            for value in forms:
                env = {S("K0"): "3", S("LIBRARY"): value}
                path = module.parse_settings(env)["library"]
                binding_refuses = module.library_path_problem(path) is not None
                rc, doc = verify.run(env=env)
                flagged = [p for p in doc["settings"]["problems"]
                           if p["variable"] == S("LIBRARY")]
                check(binding_refuses == bool(flagged),
                      "%r: the binding %s it, verify %s" % (value, "refuses" if binding_refuses else
                                                            "accepts", flagged or "accepts it"))
                check(not flagged or (flagged[0]["severity"] == "error" and rc == 1),
                      "%r: verify exit %d, %r" % (value, rc, flagged))
                refused += binding_refuses
            check(refused == 5, "%d of %d forms refused, 5 expected" % (refused, len(forms)))
            return "%d forms, %d refused" % (len(forms), refused)
        library_forms()

        # The switch: the import (not parse_settings) decides between a warning and a stop.
        lenient = [
            ({S("STATS"): "maybe"}, True),
            ({S("K0"): "0", S("STATS"): "maybe"}, True),
            ({S("K0"): "-0", S("MIN_BATCH"): "x"}, True),
            ({S("K0"): " 00 ", S("MIN_BATCH"): "2000"}, True),
            ({S("K0"): "", S("MAX_TOKENS"): "0"}, True),
            ({S("K0"): "3", S("STATS"): "maybe"}, False),
            ({S("K0"): "+1", S("MIN_BATCH"): "2000"}, False),
            ({S("K0"): "abc"}, False),
            ({S("K0"): "0x0", S("STATS"): "maybe"}, False),
            ({S("K0"): "1", S("STRICT"): "on"}, False),
            ({S("K0"): "1", S("MIN_BATCH"): "abc", S("STATS"): "yes"}, False),
            ({S("K0"): "1", S("MAX_TOKENS"): "5000"}, False),
            ({S("K0"): "1", S("MIN_BATCH"): "9", S("MAX_TOKENS"): "8"}, False),
            ({S("STRICT"): "on", S("STATS"): "yes", S("MIN_BATCH"): "4"}, True),
        ]

        @case("off (K0 valid and 0) warns, on or bad K0 stops: the import and verify agree, "
              "and on what it runs with")
        def leniency():
            out = []
            for env, imports in lenient:
                verdict = import_verdict(moe, env)
                imported = verdict[0] == "on"
                rc, doc = verify.run(env=env)
                wrong = effective_disagreement(verdict, doc["settings"]["effective"])
                check(not wrong, "%r: %s" % (env, wrong))
                warned = any(c.get("warning") for c in doc["checks"] if c["check"] == "settings")
                check(imported == imports, "%r: the import %s" % (env, "went on" if imported else "stopped"))
                check((rc == 0 and warned) if imports else rc == 1,
                      "%r: the import %s, verify exit %d (warning: %s)"
                      % (env, "went on" if imported else "stopped", rc, warned))
                out.append("ok" if imports else "stop")
            return " ".join(out)
        leniency()

        @case("a rule changed in patch.ini reaches the binding as it reaches verify (issue 37: "
              "the binding's settings table is rendered from the definition, not written twice)")
        def drift():
            # A copy of the definition whose switch allows less, and whose
            # MIN_BATCH defaults higher: a binding with its own copy of the
            # rules would still take the old ones.
            changed = os.path.join(tmp, "changed-def")
            shutil.copytree(DEFINITION, changed)
            shutil.copytree(os.path.join(os.path.dirname(DEFINITION), "binding-core"),
                            os.path.join(tmp, "binding-core"))
            ini_path = os.path.join(changed, "patch.ini")
            with open(ini_path, encoding="utf-8") as f:
                ini = f.read()
            ini, n1 = re.subn(r"(\[setting:%sK0\][^\[]*?\nmax = )\d+" % PREFIX, r"\g<1>5", ini)
            ini, n2 = re.subn(r"(\[setting:%sK0\][^\[]*?\nwarn_from = )\d+" % PREFIX, r"\g<1>4", ini)
            ini, n3 = re.subn(r"(\[setting:%sMIN_BATCH\][^\[]*?\ndefault = )\d+" % PREFIX, r"\g<1>7",
                              ini)
            check(n1 == n2 == n3 == 1, "the definition's K0 max/warn_from or MIN_BATCH default not found")
            with open(ini_path, "w", encoding="utf-8") as f:
                f.write(ini)
            other = os.path.join(tmp, "checkout-changed")
            os.makedirs(os.path.join(other, os.path.dirname(TARGET)))
            shutil.copyfile(args.fixture, os.path.join(other, TARGET))
            p = subprocess.run([OEAPATCH, "apply", "-C", other, "--patch", changed, "--library",
                                args.library], env=environment_without_settings(),
                               capture_output=True, text=True)
            check(p.returncode == 0, "apply with the changed definition: %s" % p.stderr)
            bmod = load_module(os.path.join(other, os.path.dirname(TARGET)), {})
            for value in ("5", "6"):
                want, _ = binding_verdict(bmod, S("K0"), value)
                args_v = [OEAPATCH, "verify", "-C", other, "--patch", changed, "--json"]
                env = dict(environment_without_settings(), **{S("K0"): value})
                doc = json.loads(subprocess.run(args_v, env=env, capture_output=True).stdout)
                got, _ = verify_verdict(doc)
                check(want == got == ("ok" if value == "5" else "bad"),
                      "K0=%s with max = 5: binding %s, verify %s" % (value, want, got))
            check(bmod.MIN_BATCH == 7, "MIN_BATCH's default 7 in patch.ini, the binding runs %r"
                  % bmod.MIN_BATCH)
            return "max and default followed"
        drift()
        print("(%d verify runs)" % verify.runs)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
