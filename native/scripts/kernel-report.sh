#!/usr/bin/env bash
# kernel-report.sh - static figures of liboea's CUDA kernels, no GPU needed:
# registers, spills, stack and machine-code size of every kernel variant for
# every target architecture. It compiles native/src/oea_cuda.cu to one cubin
# per architecture with the library's own exactness flags and -Xptxas -v,
# reads the counts from ptxas and the size of each kernel's .text section
# from the cubin (readelf; cuobjdump -elf when readelf is missing).
#
#   native/scripts/kernel-report.sh [--archs "80 90 100 120"] [--nvcc PATH] [--keep DIR]
#                                   [--limit BYTES]   (default 65536) [--no-cache] [--print-key]
#
# The cubins and ptxas's output are kept under a content key (this script,
# every file of native/src and native/include, the nvcc and its --version,
# the architectures) in ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/kernel-report/
# ($OEAPATCH_KERNEL_REPORT_CACHE): the same inputs give the same cubins, so
# a fresh clone with the cache warm reads them instead of running nvcc for
# minutes; any change of an input is another key. --no-cache compiles.
# The key hashes contents only, never a path of the checkout (sha256sum of a
# file prints its name too): every clone has the same key. --print-key prints
# it and exits (tests/native/test_kernel_report_key.sh holds it to that).
#
# Budget, checked for every kernel on every architecture: no spill stores or
# loads, and at most 64 KiB (65536 bytes) of machine code: beyond that a
# kernel cannot stay in the instruction caches from one MoE layer to the next.
# Exit status: 0 within budget, 1 a kernel spills or is too large, 2 trouble
# (no nvcc, a compile error, a cubin that cannot be read).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd) # native/
archs="80 90 100 120"
nvcc=${CUDACXX:-}
keep=""
limit=65536
use_cache=1
print_key=0
while [ $# -gt 0 ]; do
	case $1 in
	--archs) archs=$2; shift 2 ;;
	--nvcc) nvcc=$2; shift 2 ;;
	--keep) keep=$2; shift 2 ;;
	--limit) limit=$2; shift 2 ;;
	--no-cache) use_cache=0; shift ;;
	--print-key) print_key=1; shift ;;
	-h | --help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "kernel-report: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -z "$nvcc" ]; then
	nvcc=$(command -v nvcc || true)
	[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
fi
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
	echo "kernel-report: nvcc not found (set CUDACXX or --nvcc)" >&2
	exit 2
fi
elf_sections() { # cubin -> "name size" per .text section
	if command -v readelf >/dev/null 2>&1; then
		readelf -SW "$1" 2>/dev/null |
			sed -nE 's/.*\] \.text\.([^ ]+) +PROGBITS +[0-9a-f]+ [0-9a-f]+ ([0-9a-f]+) .*/\1 \2/p'
	else
		local cuobjdump
		cuobjdump=$(dirname "$nvcc")/cuobjdump
		"$cuobjdump" -elf "$1" 2>/dev/null |
			sed -nE 's/.*\.text\.([^ ]+) +PROGBITS +[0-9a-fx]+ +[0-9a-fx]+ +([0-9a-fx]+).*/\1 \2/p' |
			sed -E 's/ 0x/ /'
	fi
}

# The content key of what nvcc would make (see the top), and its cache entry.
# Contents only: "sha256sum FILE" would print FILE's path, another per clone.
cache=""
if [ "$use_cache" = 1 ] || [ "$print_key" = 1 ]; then
	key=$({
		sha256sum <"$0"
		(cd "$here" && find src include -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
		readlink -f "$nvcc"
		"$nvcc" --version
		echo "archs $archs"
	} | sha256sum | cut -c1-32)
	if [ "$print_key" = 1 ]; then
		echo "$key"
		exit 0
	fi
	cache=${OEAPATCH_KERNEL_REPORT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/kernel-report}/$key
fi

work=${keep:-$(mktemp -d)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
cached=0
if [ -n "$cache" ] && [ -f "$cache/complete" ]; then
	cp "$cache"/sm_*.cubin "$cache"/sm_*.log "$work/"
	cached=1
	echo "kernel-report: the cubins of key $key (cached: $cache)"
fi

# The same device-code flags as the library (native/CMakeLists.txt): the
# report is about the code that ships. One architecture per job, in parallel.
jobs=$(nproc 2>/dev/null || echo 2)
pids=()
[ "$cached" = 1 ] && archs_to_build="" || archs_to_build=$archs
for a in $archs_to_build; do
	"$nvcc" -cubin -arch="sm_$a" -O3 --fmad=false --ftz=false --prec-div=true --prec-sqrt=true \
		-Xptxas -v -I"$here/include" -I"$here/src" -o "$work/sm_$a.cubin" \
		"$here/src/oea_cuda.cu" >"$work/sm_$a.log" 2>&1 &
	pids+=($!)
	if [ ${#pids[@]} -ge "$jobs" ]; then
		wait "${pids[0]}" || { cat "$work/sm_$a.log" >&2; echo "kernel-report: nvcc failed" >&2; exit 2; }
		pids=("${pids[@]:1}")
	fi
done
for p in "${pids[@]}"; do
	wait "$p" || { cat "$work"/sm_*.log >&2; echo "kernel-report: nvcc failed" >&2; exit 2; }
done
# Stored whole or not at all (a copy, then one rename; a concurrent run that
# stored the same key first wins, with the same bytes).
if [ -n "$cache" ] && [ "$cached" = 0 ] && mkdir -p "$(dirname "$cache")" 2>/dev/null; then
	tmp=$(mktemp -d "$cache.tmp.XXXXXX") &&
		cp "$work"/sm_*.cubin "$work"/sm_*.log "$tmp/" && touch "$tmp/complete" &&
		{ mv -T "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"; }
fi

status=0 summary=""
printf '%-6s %-40s %5s %7s %7s %6s %8s\n' arch kernel regs spill_st spill_ld stack bytes
for a in $archs; do
	log="$work/sm_$a.log" cubin="$work/sm_$a.cubin"
	sizes=$(elf_sections "$cubin")
	if [ -z "$sizes" ]; then
		echo "kernel-report: no .text sections read from $cubin" >&2
		exit 2
	fi
	# ptxas -v: "Compiling entry function 'NAME' for 'sm_NN'", then the
	# stack/spill line and the "Used N registers" line of that function.
	rows=$(awk -v sizes="$sizes" '
		BEGIN { n = split(sizes, s, "\n"); for (i = 1; i <= n; i++) { split(s[i], f, " "); sz[f[1]] = strtonum_hex(f[2]) } }
		function strtonum_hex(h,   i, c, v) { v = 0; h = tolower(h)
			for (i = 1; i <= length(h); i++) { c = index("0123456789abcdef", substr(h, i, 1)) - 1; v = v * 16 + c }
			return v }
		/Compiling entry function/ { match($0, /'\''[^'\'']+'\''/); fn = substr($0, RSTART + 1, RLENGTH - 2) }
		/bytes stack frame/ { st = $0; sub(/^[^0-9]*/, "", st); split(st, w, " "); stack[fn] = w[1]
			match($0, /[0-9]+ bytes spill stores/); ss[fn] = substr($0, RSTART, RLENGTH) + 0
			match($0, /[0-9]+ bytes spill loads/); sl[fn] = substr($0, RSTART, RLENGTH) + 0 }
		/Used [0-9]+ registers/ { match($0, /Used [0-9]+/); regs[fn] = substr($0, RSTART + 5, RLENGTH - 5) + 0 }
		END { for (k in regs) printf "%s %d %d %d %d %d\n", k, regs[k], ss[k], sl[k], stack[k], (k in sz) ? sz[k] : -1 }
	' "$log" | sort)
	if [ -z "$rows" ]; then
		echo "kernel-report: ptxas printed no figures for sm_$a" >&2
		exit 2
	fi
	max_b=0 max_r=0 count=0
	while read -r fn regs sst sld stack bytes; do
		# _Z10oea_kernelILi<dtype>ELi<mode>ELi<experts per lane>EEv9oea_kargs
		name=$(echo "$fn" | sed -nE 's/^_Z10oea_kernelILi([0-9]+)ELi([0-9]+)ELi([0-9]+)EEv9oea_kargs$/\1 \2 \3/p')
		if [ -n "$name" ]; then
			set -- $name
			dt=(f32 bf16 f16) md=(softmax softmax+bias sigmoid sigmoid+bias)
			name="oea_kernel<${dt[$1]},${md[$2]},E<=$((32 * $3))>"
		else
			name=$fn
		fi
		flag=""
		if [ "$sst" -gt 0 ] || [ "$sld" -gt 0 ]; then flag=" SPILLS"; status=1; fi
		if [ "$bytes" -lt 0 ]; then flag="$flag NO-SIZE"; status=2; fi
		if [ "$bytes" -gt "$limit" ]; then flag="$flag TOO-LARGE"; status=1; fi
		printf '%-6s %-40s %5d %7d %7d %6d %8d%s\n' "sm_$a" "$name" "$regs" "$sst" "$sld" "$stack" "$bytes" "$flag"
		[ "$bytes" -gt "$max_b" ] && max_b=$bytes
		[ "$regs" -gt "$max_r" ] && max_r=$regs
		count=$((count + 1))
	done <<<"$rows"
	summary="$summary$(printf 'sm_%s: %d kernels, at most %d registers, at most %d bytes of code (limit %d)' "$a" "$count" "$max_r" "$max_b" "$limit")
"
done
printf '\n%s' "$summary"
case $status in
0) echo "kernel-report: PASS (no spills, every kernel <= $limit bytes)" ;;
1) echo "kernel-report: FAIL (a kernel spills or exceeds $limit bytes; see the flags above)" ;;
*) echo "kernel-report: a size could not be read" ;;
esac
exit $status
