#!/usr/bin/env bash
# dockerfile_in_chroot.sh - runs docs/deploy/Dockerfile without a Docker
# engine: each stage in a fresh copy of the clean Debian 12 root
# (tests/e2e/clean_root.sh, debootstrap --variant=minbase bookworm, standing
# in for debian:bookworm and debian:bookworm-slim), each RUN in a chroot with
# its own mount and PID namespace and /proc, the stage's ARG and ENV values in
# a clean environment. Then it starts the final stage's ENTRYPOINT the way a
# container would, with `true` as the command (the server cannot run here):
# the gate must pass on the patched image, refuse once the patch is reverted,
# and repair with OEAPATCH_REAPPLY=1.
#
#   tests/e2e/dockerfile_in_chroot.sh [--build-arg NAME=VALUE]... [--keep]
#
# It is not run by ctest: it needs root and the network (Debian's packages and
# PyPI: the build stage runs scripts/setup-deps.sh build, the final stage pip
# installs sglang) and takes minutes. To keep it light, pass
# --build-arg SGLANG_PIP="--no-deps sglang" (the package without torch: enough
# to patch and verify, not to serve). Understands the subset of Dockerfile the
# recipe uses: FROM debian:bookworm[-slim] [AS name], ARG, ENV, WORKDIR, COPY
# [--from=stage] (from the repository's files that git lists), RUN (shell
# form), ENTRYPOINT and CMD (exec form). Prints "N passed, M failed".
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DOCKERFILE=$SRC/docs/deploy/Dockerfile
. "$SRC/tests/e2e/testlib.sh"
declare -A build_args=()
keep=0
while [ $# -gt 0 ]; do
	case $1 in
	--build-arg) build_args[${2%%=*}]=${2#*=}; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--build-arg NAME=VALUE]... [--keep]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 2; }
CLEAN=$("$SRC/tests/e2e/clean_root.sh") || exit 2
WORK=$(mktemp -d /var/tmp/oeapatch-dockerfile.XXXXXX)
[ "$keep" = 1 ] || trap 'rm -rf "$WORK"' EXIT
echo "work: $WORK"

declare -A stage_dir=()
root="" workdir=/ nstage=0
env_list=() entrypoint="" cmd=""
base_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root)

# expand WORD: $VAR and ${VAR} from the stage's ARG and ENV values.
expand() { env -i "${base_env[@]}" "${env_list[@]}" bash -c 'eval "printf %s \"$1\""' _ "$1"; }
setenv() { # setenv NAME VALUE: sets (or replaces) a stage variable
	local i
	for i in "${!env_list[@]}"; do
		[ "${env_list[$i]%%=*}" = "$1" ] && unset 'env_list[i]'
	done
	env_list+=("$1=$2")
	env_list=("${env_list[@]}")
	[ "$1" = PATH ] && base_env[0]="PATH=$2"
}
inroot() { # inroot DIR CMD...: in the stage's root, at DIR, with the stage's environment
	local dir=$1
	shift
	env -i "${base_env[@]}" "${env_list[@]}" \
		unshare --mount --pid --fork --mount-proc="$root/proc" chroot "$root" \
		/bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$dir" "$@"
}

# The Dockerfile's instructions, one per line (continuations joined, comments dropped).
mapfile -t instructions < <(sed -e '/^[[:space:]]*#/d' "$DOCKERFILE" |
	awk '{ if (sub(/\\[[:space:]]*$/, "")) { buf = buf $0 " "; next } print buf $0; buf = "" }' |
	grep -v '^[[:space:]]*$')

for ins in "${instructions[@]}"; do
	op=${ins%% *}
	rest=${ins#* }
	rest=${rest#"${rest%%[![:space:]]*}"}
	case $op in
	FROM)
		read -r image as name <<<"$rest"
		case $image in
		debian:bookworm | debian:bookworm-slim) ;;
		*) bad "FROM $image: only debian:bookworm[-slim] can be stood in for here"; e2e_summary; exit 1 ;;
		esac
		nstage=$((nstage + 1))
		root=$WORK/stage$nstage
		echo "== stage $nstage: FROM $image${name:+ AS $name} (a copy of $CLEAN)"
		cp -a "$CLEAN" "$root"
		cp /etc/resolv.conf "$root/etc/resolv.conf" # as Docker does: the build's DNS
		# A network that intercepts TLS with its own CA (this project's machines
		# do) needs that CA in every stage, as a Docker build there would: the
		# host's local CAs go where update-ca-certificates (run when a stage
		# installs ca-certificates) takes them from.
		if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
			mkdir -p "$root/usr/local/share/ca-certificates"
			cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
		fi
		[ -n "${name:-}" ] && stage_dir[$name]=$root
		env_list=() workdir=/ name=""
		base_env[0]="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		;;
	ARG)
		n=${rest%%=*}
		v=""; [[ $rest == *=* ]] && v=${rest#*=}
		[ -n "${build_args[$n]+x}" ] && v=${build_args[$n]}
		setenv "$n" "$v"
		echo "ARG $n=$v"
		;;
	ENV)
		# NAME=VALUE pairs separated by blanks (values without blanks, as in the recipe).
		for pair in $rest; do
			v=$(expand "${pair#*=}")
			setenv "${pair%%=*}" "$v"
			echo "ENV ${pair%%=*}=$v"
		done
		;;
	WORKDIR)
		workdir=$(expand "$rest")
		mkdir -p "$root$workdir"
		;;
	COPY)
		from=""
		if [[ $rest == --from=* ]]; then
			from=${rest%% *}; from=${from#--from=}; rest=${rest#* }
		fi
		read -r src dst <<<"$rest"
		echo "COPY ${from:+--from=$from }$src $dst"
		if [ -n "$from" ]; then
			mkdir -p "$root$dst" && cp -a "${stage_dir[$from]}$src/." "$root$dst/"
		elif [ "$src" = . ]; then
			# The context: the files git lists (tracked and untracked, not ignored),
			# as .dockerignore keeps out build trees and deps/.
			mkdir -p "$root$dst"
			(cd "$SRC" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) |
				tar -xf - -C "$root$dst"
		else
			[[ $dst == */ ]] && dst=$dst$(basename "$src")
			mkdir -p "$(dirname "$root$dst")" && cp -a "$SRC/$src" "$root$dst"
		fi
		;;
	RUN)
		echo "RUN $rest"
		t0=$(date +%s)
		if inroot "$workdir" /bin/sh -c "$rest" >"$WORK/run.log" 2>&1; then
			tail -25 "$WORK/run.log" | sed 's/^/    /'
			ok "stage $nstage: RUN ${rest:0:70}... ($(($(date +%s) - t0)) s)"
		else
			bad "stage $nstage: RUN $rest" "$(tail -40 "$WORK/run.log")"
			e2e_summary
			exit 1
		fi
		;;
	ENTRYPOINT) entrypoint=$rest ;;
	CMD) cmd=$rest ;;
	*) bad "unknown instruction $op"; e2e_summary; exit 1 ;;
	esac
done

echo "== the container's start (ENTRYPOINT, with 'true' for CMD: $cmd)"
mapfile -t ep < <(python3 -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$entrypoint")
py=$(for e in "${env_list[@]}"; do [ "${e%%=*}" = OEAPATCH_PYTHON ] && echo "${e#*=}"; done)
expect "the gate passes on the patched image and runs the command" 0 inroot / "${ep[@]}" true
has "verify's verdict is shown" "verif"
exe=$(for e in "${env_list[@]}"; do [ "${e%%=*}" = OEAPATCH ] && echo "${e#*=}"; done)
expect "revert in the image (as a pip install -U would lose the patch)" 0 \
	inroot / "${exe:-/opt/oeapatch/bin/oeapatch}" revert --python "$py"
expect "the gate refuses to start" 1 inroot / "${ep[@]}" true
has "it says why" "not starting"
env_list+=(OEAPATCH_REAPPLY=1)
expect "OEAPATCH_REAPPLY=1: re-applies, then starts" 0 inroot / "${ep[@]}" true
unset 'env_list[${#env_list[@]}-1]'
expect "the gate passes again" 0 inroot / "${ep[@]}" true
e2e_summary
