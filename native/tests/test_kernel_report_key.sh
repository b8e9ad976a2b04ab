#!/usr/bin/env bash
# The kernel report's cache key is the same in every clone: two copies of
# native/ (the script, src/, include/) at different paths print the same key,
# and a changed source byte prints another. A key that held the checkout's
# path missed the warm cache in every fresh clone of CI and ran nvcc for
# every architecture (minutes; issue: CI time).
#   test_kernel_report_key.sh NATIVE_DIR NVCC
set -euo pipefail
native=$1 nvcc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in a/native elsewhere/deeper/native; do
	mkdir -p "$tmp/$d"
	cp -R "$native/scripts" "$native/src" "$native/include" "$tmp/$d/"
done
key() { bash "$tmp/$1/scripts/kernel-report.sh" --nvcc "$nvcc" --print-key; }
k1=$(key a/native) k2=$(key elsewhere/deeper/native)
[[ $k1 =~ ^[0-9a-f]{32}$ ]] || { echo "FAIL: not a key: '$k1'"; exit 1; }
[ "$k1" = "$k2" ] || { echo "FAIL: the key depends on the checkout's path: $k1 vs $k2"; exit 1; }
echo "// a changed byte" >>"$tmp/a/native/src/oea_cuda.cu"
k3=$(key a/native)
[ "$k3" != "$k1" ] || { echo "FAIL: a changed source kept the key $k1"; exit 1; }
echo "PASS: one key for both paths ($k1); a changed source gives $k3"
