
shout() {
	{
		echo 'oeapatch: ####################################################################'
		echo "oeapatch: $hook: $1"
		shift
		for line in "$@"; do echo "oeapatch:   $line"; done
		echo 'oeapatch: ####################################################################'
	} >&2
}

# git runs hooks in the work tree's top (in GIT_DIR when bare).
top=$(pwd -P)
dir=$top${sub:+/$sub}
status=0
chained="$(dirname -- "$0")/$hook.oeapatch-chained"


# The hook that was here first, run as git would have run it: under the
# name git used, not as $hook.oeapatch-chained (dispatchers such as husky's
# pick what to run by $(basename "$0") and find their files beside
# $(dirname "$0")). A script of a POSIX shell is read by that shell with
# $0 exactly what git passed us; anything else (a binary, a Python or Ruby
# script) runs through a link named $hook, in a temporary directory.
run_chained() {
	line=
	IFS= read -r line < "$chained" 2>/dev/null
	case $line in
	'#!'*)
		# As the kernel reads it: the interpreter, then the rest as one argument.
		rest=${line#??}
		rest=${rest#"${rest%%[! 	]*}"}
		interp=${rest%%[ 	]*}
		arg=${rest#"$interp"}
		arg=${arg#"${arg%%[! 	]*}"}
		arg=${arg%"${arg##*[! 	]}"}
		# "#!/bin/sh -" ends the options before the script's name; ours come after.
		case $arg in - | --) arg= ;; esac
		prog=$interp
		if [ "${interp##*/}" = env ]; then
			prog=${arg#-S}
			prog=${prog#"${prog%%[! 	]*}"}
			prog=${prog%%[ 	]*}
		fi
		# Shells whose '.' leaves $0 alone (zsh's sets it to the file read).
		case ${prog##*/} in
		sh | dash | bash | ash)
			"$interp" ${arg:+"$arg"} -c 'oeapatch_chained=$1; shift; . "$oeapatch_chained"' \
				"$0" "$chained" "$@"
			return
			;;
		esac
		;;
	esac
	case $chained in
	/*) real=$chained ;;
	*) real=$top/$chained ;;
	esac
	if links=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-hook.XXXXXX") && ln -s "$real" "$links/$hook"; then
		"$links/$hook" "$@"
		set -- $?
		rm -rf "$links"
		return "$1"
	fi
	[ -z "$links" ] || rm -rf "$links"
	"$chained" "$@"
}

can_run() {
	if [ ! -x "$oeapatch" ]; then
		shout "cannot run $oeapatch: the patch was NOT checked" \
			"was oeapatch moved or removed? reinstall: oeapatch hook install -C '$dir'"
		return 1
	fi
}
