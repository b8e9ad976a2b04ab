#!/usr/bin/python3
"""The metrics folder of a default vLLM server (contrib/wheel/oeapatch/metrics.py):
the gauge has one sample per verdict of a process that still runs. A verdict
whose pid is no process's (0, negative, not a number) is never live: kill()
takes 0 as this process group and -1 as every process it may signal, so
asking them says "alive" (the defect: a verdict file with pid 0 stayed on
/metrics forever). prometheus_client is not needed for this part (the
release suites run the collector on vLLM's own registry)."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "contrib", "wheel"))

from oea_testlib import case, check, library_args, summary  # noqa: E402
from oeapatch import metrics  # noqa: E402


@case("only the verdicts of running processes are live")
def verdicts():
    folder = tempfile.mkdtemp(prefix="oea-metrics-")
    ended = subprocess.Popen(["true"])
    ended.wait()
    pids = {"self": os.getpid(), "zero": 0, "minus": -1, "text": "x", "none": None,
            "ended": ended.pid}
    for name, pid in pids.items():
        metrics.write(folder, "verified-%s.json" % name, {"patch": "p/1", "pid": pid, "value": 1})
    live = sorted(str(d["pid"]) for d in metrics.live_verdicts(folder))
    check(live == [str(os.getpid())], "live verdicts: %s (only this process runs)" % live)
    return json.dumps(live)


def main():
    library_args(__doc__)
    verdicts()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
