"""One interpreter start per release: the phases of a real-release suite run as
forked children of one interpreter that has imported the heavy third-party
modules once (torch, its compiler, transformers), instead of a new interpreter
per phase that imports them again (issue 27: of phase `off`'s 13.4 s on SGLang
0.5.23, 6 s were that import, 5.3 s inductor's vector-ISA probe, below, and
1.5 s the interpreter's teardown at exit).

    server = PhaseServer(python, preload=TORCH_STACK)   # the release's interpreter
    rc, out, err = server.run([script, arg, ...], env, timeout=900)
    rc, out, err = server.run(["-c", code], env)
    server.close()

What a child is, and why its phase still sees the release as a server does:
- It is a fork of an interpreter of the release's environment that has imported
  only the modules named by `preload`, never the framework (its package is what
  the suite patches and reverts between phases: each child imports it anew from
  the files as they are at that moment, by its real module path).
- Its environment is exactly `env` (os.environ cleared and refilled), its
  sys.argv the request's, sys.path[0] the script's folder ('' for -c) followed by
  env's PYTHONPATH entries, as a new interpreter would have them; its stdin is
  /dev/null, its stdout and stderr are files the client reads back.
- It ends the way a script ends: SystemExit and uncaught exceptions as the
  interpreter reports them, non-daemon threads joined, atexit functions run,
  buffers flushed; only the module teardown that follows is skipped (_finalize).
- The preloaded modules read no setting a phase changes (the frameworks' OEA
  variables, PROMETHEUS_MULTIPROC_DIR: prometheus_client picks its value class
  from it at import, so it is never preloaded), and the server runs no torch
  operation before forking: torch's OpenMP pool is first made in the child.
  The one thread besides the main one, OpenBLAS's worker (numpy), is made
  again in the child by OpenBLAS's own fork handler, as under multiprocessing.

A suite may also preload part of the framework itself (PhaseServer.extend):
the modules of its import chain that the patch never changes and that read
no setting a phase changes (SGLang's ForwardBatch and what it imports: 4-5 s
of every phase on a loaded machine). Named with `never`, the patched module
and everything of ours (a name with "_oeapatch") must not come with them:
the extension is refused, naming it, and the server stays as it was, so a
release whose chain pulls the patched file in still runs every phase, just
without the saving. After an extension the server serves only requests with
its PYTHONPATH (a stub package it imported stays imported).

The client side (PhaseServer) keeps the server's stdin and stdout as its
request and reply channel: one JSON line each way per phase. A phase past its
timeout kills the server with its children; the next run starts a new one.
"""

import importlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import traceback

# Third-party modules every release imports on the way to its routing code
# and that cost most of an interpreter start (torch's compiler stack is imported
# by the frameworks' torch.compile decorators, transformers by their configs).
TORCH_IMPORTS = ("numpy", "torch", "torch._dynamo", "torch._inductor.compile_fx",
                 "transformers", "transformers.models.llama.modeling_llama")
# "module:function" also calls a function that caches a per-process answer:
# inductor's choice of vector ISA starts interpreters (`python -c "import
# torch; cdll.LoadLibrary(...)"`, 1.7 s each; 4.6 s in all on torch 2.9.1) in
# every process that compiles a kernel on the CPU, as SGLang's torch.compile'd
# grouped top-k does in every phase; asked once here, the children inherit the
# answer. A suite whose phases compile nothing with inductor (vLLM's run with
# TORCHDYNAMO_DISABLE) preloads TORCH_IMPORTS alone: the question would be
# asked for nothing in every release's server. Either way a phase that needs
# the answer gets inductor's own (asked in the child when not inherited), so
# the preload changes the time, never what a phase sees.
TORCH_STACK = TORCH_IMPORTS + ("torch._inductor.cpu_vec_isa:pick_vec_isa",)
NEVER_PRELOAD = ("prometheus_client",)


class PhaseServer:
    def __init__(self, python, preload=TORCH_STACK, env=None):
        self.python = python
        self.preload = list(preload)
        self.env = {k: v for k, v in (env if env is not None else os.environ).items()
                    if k != "PYTHONPATH"}
        self.proc = None
        self.log = None
        self.starts = 0
        self.extended = None  # (modules, pythonpath, never) of extend()

    def _start(self):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [self.python, os.path.abspath(__file__)] + self.preload,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=self.env, text=True, start_new_session=True)
        self.starts += 1
        if self.extended is not None:
            # A server started again (after a timeout) gets the same modules.
            modules, pythonpath, never = self.extended
            self.extended = None
            error = self.extend(modules, pythonpath, never)
            if error:
                self.extended = (modules, pythonpath, never)
                raise RuntimeError("phase server: extension lost at restart: " + error)

    def _request(self, request, timeout):
        """Sends one JSON line, returns the reply's dict (None: no reply)."""
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None
        deadline = time.monotonic() + timeout
        reply = ""
        while not reply.endswith("\n"):
            left = deadline - time.monotonic()
            if not select.select([self.proc.stdout], [], [], max(left, 0))[0]:
                return None
            chunk = self.proc.stdout.readline()
            if not chunk:
                return None
            reply += chunk
        return json.loads(reply)

    def extend(self, modules, pythonpath="", never=(), timeout=600):
        """Imports `modules` into the server itself (with `pythonpath`'s
        entries on its path), for every later phase to inherit. Refused when
        one of them pulls in a module named in `never` (or a prefix of it:
        "a.b" covers "a.b.c"), anything with "_oeapatch" in its name, or one of
        NEVER_PRELOAD; refused, the server is started anew as it was. Returns
        None, or why it was refused."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        reply = self._request({"preload": list(modules), "pythonpath": pythonpath,
                               "never": list(never)}, timeout)
        error = "no reply: " + self._server_log() if reply is None else reply.get("error")
        if error:
            self.close()
            return error
        self.extended = (list(modules), pythonpath, list(never))
        return None

    def _server_log(self):
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read()[-3000:]

    def run(self, argv, env, timeout=900, cwd=None, merge=False):
        """(returncode, stdout, stderr) of `python argv...` run with `env` in
        `cwd` (default: the caller's); merge: stderr into stdout, in order."""
        if self.extended is not None and env.get("PYTHONPATH", "") != self.extended[1]:
            return 2, "", ("phase server: extended with PYTHONPATH %r, asked for %r"
                           % (self.extended[1], env.get("PYTHONPATH", "")))
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        with tempfile.TemporaryDirectory(prefix="oea-phase-") as tmp:
            paths = {"stdout": os.path.join(tmp, "out"), "stderr": os.path.join(tmp, "err")}
            if merge:
                paths["stderr"] = paths["stdout"]
            request = dict(paths, argv=list(argv), env=dict(env), cwd=cwd or os.getcwd())
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                return 1, "", "phase server gone: " + self._server_log()
            deadline = time.monotonic() + timeout
            reply = ""
            while not reply.endswith("\n"):
                left = deadline - time.monotonic()
                ready = select.select([self.proc.stdout], [], [], max(left, 0))[0]
                if not ready:
                    self.close()
                    return 124, self._read(paths["stdout"]), (
                        self._read(paths["stderr"]) + "\nphase timed out after %d s" % timeout)
                chunk = self.proc.stdout.readline()
                if not chunk:
                    log = self._server_log()
                    self.close()
                    return 1, self._read(paths["stdout"]), (
                        self._read(paths["stderr"]) + "\nphase server ended: " + log)
                reply += chunk
            rc = json.loads(reply)["rc"]
            return rc, self._read(paths["stdout"]), "" if merge else self._read(paths["stderr"])

    @staticmethod
    def _read(path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def close(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- the server


def _child(request, reply):
    """Becomes the phase: never returns to the server's loop."""
    reply.close()  # the server's channel, in this process only
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    if request["stderr"] != request["stdout"]:
        os.close(out)
        out = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 2)
    os.close(out)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    head = "" if argv[0] == "-c" else os.path.dirname(os.path.abspath(argv[0]))
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    # The entries an extension put after sys.path[0] are the request's own
    # (run() holds the PYTHONPATH to the extension's): dropped, then put back
    # where a new interpreter has them.
    del sys.path[1:1 + len(_EXTENDED_PATH)]
    sys.path[:1] = [head] + extra
    importlib.invalidate_caches()
    sys.argv = argv
    import runpy

    try:
        if argv[0] == "-c":
            import types

            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            runpy.run_path(argv[0], run_name="__main__")
        status = 0
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException as e:
        # As the interpreter prints it: from the script's frames on.
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        status = 1
    _finalize(status)


def _exit_status(code):
    """What the interpreter makes of SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finalize(status):
    """The interpreter's exit up to its module teardown: non-daemon threads
    joined, atexit functions run, the standard streams flushed. The teardown
    itself (about 1.5 s with torch loaded, the same in every phase) is skipped:
    no phase reads anything from it."""
    import atexit
    import threading

    try:
        threading._shutdown()
    except Exception:
        traceback.print_exc()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


_EXTENDED_PATH = []  # the entries extend() put on the server's sys.path


def _refused(never):
    """The loaded modules that no preload may bring in."""
    return sorted(m for m in sys.modules
                  if "_oeapatch" in m
                  or any(m == n or m.startswith(n + ".") for n in list(never) + list(NEVER_PRELOAD)))


def _extend(request):
    """Imports the request's modules into this server; the reply's error, or
    None. A refused extension leaves modules loaded: the client starts the
    server anew."""
    entries = [p for p in request["pythonpath"].split(os.pathsep) if p]
    sys.path[1:1] = entries
    _EXTENDED_PATH[:] = entries
    importlib.invalidate_caches()
    try:
        for name in request["preload"]:
            importlib.import_module(name)
    except BaseException as e:
        return "importing %s: %s: %s" % (name, type(e).__name__, e)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    refused = _refused(request["never"])
    if refused:
        return "the extension imported %s, which each phase must import itself" % (
            ", ".join(refused[:5]))
    return None


def serve(preload):
    for item in preload:
        name, _, function = item.partition(":")
        if name.split(".")[0] in NEVER_PRELOAD:
            continue
        try:
            module = importlib.import_module(name)
            if function:
                getattr(module, function)()
        except Exception as e:  # a release without it: its phases do it themselves
            print("phase server: %s not preloaded: %s" % (item, e), file=sys.stderr)
    # A module that must be imported by each phase under its own settings,
    # pulled in by one of the preloads: every phase would inherit it as the
    # server's settings made it. Refused: the client's next run fails, naming it.
    inherited = [m for m in NEVER_PRELOAD if m in sys.modules]
    if inherited:
        print("phase server: the preloads imported %s, which each phase must import "
              "itself" % ", ".join(inherited), file=sys.stderr)
        sys.exit(3)
    reply = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        request = json.loads(line)
        if "preload" in request:
            saved = os.dup(1)  # an import that prints must not write into the channel
            os.dup2(2, 1)
            try:
                error = _extend(request)
            finally:
                sys.stdout.flush()
                os.dup2(saved, 1)
                os.close(saved)
            reply.write(json.dumps({"rc": 0 if error is None else 3, "error": error}) + "\n")
            reply.flush()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sys.stdin = open(os.devnull)
            _child(request, reply)
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        reply.flush()


if __name__ == "__main__":
    serve(sys.argv[1:])
