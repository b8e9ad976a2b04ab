"""OEA's series on the /metrics of a default vLLM server.

vLLM serves /metrics from its API server process. Where
PROMETHEUS_MULTIPROC_DIR is set (`vllm serve --api-server-count` > 1 sets
it; so may the user), every process's prometheus_client values live in
that folder's files and /metrics reads them all: the binding's counters
and the plugin's gauge, created in the engine's worker processes, appear
there as they are. A default server (one API server) leaves the variable
unset: /metrics then serves prometheus_client's default registry of the
API server process alone (vllm/v1/metrics/prometheus.py,
get_prometheus_registry), and nothing a worker creates reaches it.

For that server this module makes a folder of its own: the first process
that loads the plugin with OEA asked for (vLLM's API server: EngineArgs
loads the general plugins before the engine's processes start) creates
it, names it in OEAPATCH_METRICS_DIR, which the engine's processes
inherit, and registers on the default registry a collector that reads
it. Each process then writes there what it would have exported: the
plugin its verdict (verified-<pid>.json), the binding its counters
(counters-<pid>.json, the totals of the stats line's snapshot, each file
replaced whole). The collector yields the counters summed over processes
(a process that ended keeps its last totals, as prometheus_client's
multiprocess counters do) and one verdict gauge per live process. The
folder is removed when the process that made it exits.
"""

import atexit
import glob
import json
import os
import shutil
import tempfile

ENV = "OEAPATCH_METRICS_DIR"

__all__ = ["ENV", "setup", "write", "OeaCollector"]


def _alive(pid):
    """Whether the process `pid` runs. A pid that is no process's (0, a
    negative one, which kill() takes as a process group or every process we
    may signal, or a value that is no number) is not alive."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_verdicts(folder):
    """The plugin's verdicts (verified-<pid>.json) of the processes that still
    run: one gauge sample each."""
    docs = (_read(path) for path in sorted(glob.glob(os.path.join(folder, "verified-*.json"))))
    return [doc for doc in docs if doc and _alive(doc.get("pid"))]


def write(folder, name, doc):
    """Replaces folder/name with the JSON `doc` whole (a reader never sees half)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(folder, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None  # a process's file being replaced, or gone: its next write counts


class OeaCollector:
    """A prometheus_client collector over the folder (module docstring)."""

    def __init__(self, folder, gauge_name, gauge_help):
        self.folder = folder
        self.gauge_name, self.gauge_help = gauge_name, gauge_help

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families = {}
        for path in sorted(glob.glob(os.path.join(self.folder, "counters-*.json"))):
            doc = _read(path) or {}
            for name, series in doc.items():
                fam = families.get(name)
                if fam is None:
                    fam = families[name] = (series.get("help", ""), series.get("labels", []), {})
                for labelvalues, value in series.get("samples", []):
                    key = tuple(labelvalues)
                    fam[2][key] = fam[2].get(key, 0) + value
        for name in sorted(families):
            text, labels, sums = families[name]
            fam = CounterMetricFamily(name, text, labels=labels)
            for key in sorted(sums):
                fam.add_metric(list(key), sums[key])
            yield fam
        gauge = GaugeMetricFamily(self.gauge_name, self.gauge_help, labels=["patch", "pid"])
        for doc in live_verdicts(self.folder):
            gauge.add_metric([doc.get("patch", ""), str(doc.get("pid"))], doc.get("value", 0))
        yield gauge


def setup(gauge_name, gauge_help, environ=None):
    """The folder this process writes to: None where PROMETHEUS_MULTIPROC_DIR
    is set (the framework's own export reaches /metrics). Made, named in
    OEAPATCH_METRICS_DIR and collected here when no parent made it."""
    environ = os.environ if environ is None else environ
    if environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return None
    folder = environ.get(ENV)
    if folder:
        return folder
    from prometheus_client import REGISTRY

    folder = tempfile.mkdtemp(prefix="oeapatch-metrics-")
    REGISTRY.register(OeaCollector(folder, gauge_name, gauge_help))
    environ[ENV] = folder
    pid = os.getpid()
    # only the process that made it removes it (a forked child inherits the hook)
    atexit.register(lambda: os.getpid() == pid and shutil.rmtree(folder, ignore_errors=True))
    return folder
