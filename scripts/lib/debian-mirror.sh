# shellcheck shell=bash
# debian-mirror.sh: sourced (bash) by the scripts that debootstrap a Debian
# release (scripts/wheel-sysroot.sh, tests/e2e/clean_root.sh), so that they
# find the Debian archive by one rule. No host name is written here: the
# mirror is the one this machine's apt already uses.
#
# debian_mirror: prints the mirror of the Debian archive to fetch from and
# returns 0, or prints nothing and returns 1. It is OEAPATCH_DEBIAN_MIRROR
# where set, else the first URI that this machine's apt sources (deb822
# .sources files first, then one-line sources.list entries) list for a
# Debian release's suite (a codename below, or its -updates). The security
# archive is skipped (it holds only updates, not a release's packages), and
# so is a source for other suites (a vendor's repository, CUDA's say, whose
# file sorts first): debootstrap needs the archive itself.
debian_mirror() {
	if [ -n "${OEAPATCH_DEBIAN_MIRROR:-}" ]; then
		printf '%s\n' "$OEAPATCH_DEBIAN_MIRROR"
		return 0
	fi
	local names='buster bullseye bookworm trixie forky' f found=''
	local -a deb822=() oneline=()
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && deb822+=("$f")
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && oneline+=("$f")
	done
	# debian(SUITES): whether one of the space-separated suites is a release's.
	local lib='
		function debian(suites,   n, s, i) {
			n = split(suites, s, " ")
			for (i = 1; i <= n; i++) {
				sub(/-updates$/, "", s[i])
				if (index(" " names " ", " " s[i] " ")) return 1
			}
			return 0
		}'
	if [ ${#deb822[@]} -gt 0 ]; then
		# A deb822 stanza ends at a blank line or at the end of its file.
		found=$(awk -v names="$names" "$lib"'
			function flush() {
				if (!done && uri != "" && uri !~ /security/ && debian(suites)) { print uri; done = 1 }
				uri = ""; suites = ""
			}
			FNR == 1 { flush() }
			/^[[:space:]]*$/ { flush(); next }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { $1 = ""; suites = $0 }
			END { flush() }' "${deb822[@]}")
	fi
	if [ -z "$found" ] && [ ${#oneline[@]} -gt 0 ]; then
		# deb [OPTIONS] URI SUITE COMPONENT...
		found=$(awk -v names="$names" "$lib"'
			$1 == "deb" && $0 !~ /security/ && !done {
				for (i = 2; i < NF; i++)
					if ($i ~ /^[a-z]+:\/\//) {
						if (debian($(i + 1))) { print $i; done = 1 }
						break
					}
			}' "${oneline[@]}")
	fi
	[ -n "$found" ] || return 1
	printf '%s\n' "$found"
}
