#!/bin/sh
# oeapatch-entrypoint: the container's pre-start gate. Verifies that the OEA
# patch holds in the sglang that $OEAPATCH_PYTHON imports (patched at image
# build time), then replaces itself with the command it was given; when the
# patch does not hold it prints why and exits with verify's status, so the
# server never starts without OEA (Docker: the container exits; Kubernetes:
# the pod restarts and its events show the reason).
#
#   OEAPATCH          the binary        (default: oeapatch on PATH, the wheel's
#                                       in a venv; else /opt/oeapatch/bin/oeapatch, the bundle)
#   OEAPATCH_PYTHON   the interpreter   (default python3 on PATH)
#   OEAPATCH_REAPPLY  1: apply before verifying (repairs a container whose
#                     site-packages was changed, e.g. by a `pip install -U`
#                     in a derived image or a mounted volume)
set -u
oeapatch=${OEAPATCH:-$(command -v oeapatch || echo /opt/oeapatch/bin/oeapatch)}
python=${OEAPATCH_PYTHON:-python3}
if [ "${OEAPATCH_REAPPLY:-0}" = 1 ]; then
	"$oeapatch" apply --python "$python" || {
		rc=$?
		echo "oeapatch-entrypoint: apply failed (exit $rc): not starting" >&2
		exit "$rc"
	}
fi
"$oeapatch" verify --python "$python" >&2 || {
	rc=$?
	echo "oeapatch-entrypoint: the OEA patch does not hold (oeapatch verify: exit $rc): not starting" >&2
	exit "$rc"
}
[ "$#" -gt 0 ] || exit 0
exec "$@"
