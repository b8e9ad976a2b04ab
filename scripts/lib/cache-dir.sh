# shellcheck shell=bash
# cache-dir.sh: sourced (bash) by the scripts that make a directory once per
# machine under ~/.cache/oeapatch and reuse it (scripts/wheel-sysroot.sh,
# scripts/wheel-cuda-aarch64.sh, tests/e2e/clean_root.sh), so that they share
# one rule for "made": a directory is used only once it holds the marker
# .oeapatch-complete, and it is built as DIR.partial and renamed into place
# under DIR.lock, so that concurrent builds wait for the first one and an
# interrupted build is never taken for a finished one.

# cache_dir_lock DIR: takes DIR.lock (file descriptor 9, held until the
# calling script exits; so not from a subshell such as $(...)) and returns 0
# when DIR is complete, 1 when the caller has to build it into DIR.partial.
cache_dir_lock() {
	mkdir -p "$(dirname "$1")"
	exec 9>"$1.lock"
	flock 9
	[ -f "$1/.oeapatch-complete" ]
}

# cache_dir_done DIR: marks DIR.partial complete and puts it in DIR's place.
cache_dir_done() {
	touch "$1.partial/.oeapatch-complete"
	rm -rf "$1" && mv "$1.partial" "$1"
}
