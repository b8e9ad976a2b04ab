#!/usr/bin/env bash
# Installs what oeapatch needs, and nothing else. Idempotent: a second run only checks.
#   scripts/setup-deps.sh build   what building the CLI and liboea needs (the default)
#   scripts/setup-deps.sh demo    that, plus Debian's torch for scripts/demo's routing run
#   scripts/setup-deps.sh test    that, plus what the test suite needs
#
# Debian packages come from apt. The tree-sitter-python grammar and tree-sitter's
# C runtime come from PyPI as pinned, checksum-verified source distributions whose
# C sources our CMake build compiles (never committed): scripts/fetch-deps.sh, with
# the pins in scripts/deps-pins.txt. The runtime (0.24.0) is compiled as a static
# library (cmake/TreeSitterRuntime.cmake) in place of Debian 12's libtree-sitter
# 0.20.7: its query cursors can stop at a depth (docs/performance.md, "The CLI:
# apply and verify against git apply").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-build}
case "$what" in build|demo|test) ;; *) echo "usage: setup-deps.sh [build|demo|test]" >&2; exit 2 ;; esac

# Debian 12 package names.
#  build: compiler, CMake, the libraries the CLI links, python3-pip to fetch the grammar,
#         patchelf (cmake --install of a -DOEAPATCH_BUNDLE=ON build sets RUNPATHs with it).
#  demo:  Debian's torch and numpy (select_experts runs on the CPU).
#  test:  cmocka (unit tests), clang/llvm/libfuzzer (sanitizer build and fuzzers), valgrind,
#         python3-venv (the environments of real sglang releases), debootstrap (the clean
#         Debian root that tests/e2e/test_install_bundle.sh runs the installed bundle in),
#         python3-yaml (the CI recipe's steps are run as written), acl (setfacl: apply keeps a
#         file's ACL, tests/e2e/test_ownership.sh), shellcheck (the hook fragments of src/scripts/),
#         python3-setuptools and python3-wheel (the build backend of the editable installs of
#         tests/e2e/test_editable.sh), ccache (scripts/test's compiles, kept across clones);
#         the manylinux wheels (scripts/build-wheel.sh, tests/e2e/test_wheel.sh): clang (above)
#         with the aarch64 GNU linker, debootstrap's wget, patch and xz-utils (libgit2's Debian
#         source), qemu-user-static (the aarch64 wheel's binaries run under it).
debs=(build-essential cmake pkg-config git ca-certificates python3 python3-pip
      libgit2-dev libjansson-dev libinih-dev libssl-dev patchelf)
case "$what" in
  demo) debs+=(python3-torch python3-numpy) ;;
  test) debs+=(python3-torch python3-numpy libcmocka-dev clang llvm libfuzzer-14-dev valgrind
               python3-venv debootstrap python3-yaml acl shellcheck python3-setuptools python3-wheel
               ccache binutils-aarch64-linux-gnu wget patch xz-utils qemu-user-static) ;;
esac

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup-deps: installing Debian packages: ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The grammar and the runtime: pinned with their digests in scripts/deps-pins.txt,
# fetched, checked and unpacked under deps/ by scripts/fetch-deps.sh (which CMake
# also runs when deps/ lacks them).
"$here/scripts/fetch-deps.sh" "$here/deps"
