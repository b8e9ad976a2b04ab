# bash completion for oeapatch. `cmake --install` puts it in
# share/bash-completion/completions/oeapatch, where bash-completion loads it
# on first use; or source it from ~/.bashrc.
#
# The commands and each command's options are read from the binary's own
# help (`oeapatch help`, `oeapatch help CMD`), so a new option is completed
# without touching this file.

# The options that take a separate argument, global or per command.
_oeapatch_takes_arg='-C|--directory|--python|--patch|--library|--junit|--env-file|-n|--max-count|--ref|--only|--k0|--batch|--ep|--svg|--min-kept'

_oeapatch_commands()
{
	"$1" help 2>/dev/null | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p'
}

# The long and short options in the options table of `oeapatch help [CMD]`.
_oeapatch_options()
{
	"$1" help ${2:+"$2"} 2>/dev/null | sed -n '/^options:\|^global options/,$p' |
		grep -oE -- '(^|[ ,])-(-[a-z][a-z-]*|[A-Za-z])' | sed 's/^[ ,]*//' | sort -u
}

# The refs of the repository at $1 (the -C given, else the current directory).
_oeapatch_refs()
{
	git ${1:+-C "$1"} for-each-ref --format='%(refname:short)' 2>/dev/null
	echo HEAD
}

_oeapatch()
{
	local bin=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev= i w cmd= sub= dir=
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
	COMPREPLY=()

	# --color=WHEN: bash splits the word at '=' (COMP_WORDBREAKS), so the
	# value is either the word after "=" or, while empty, "=" itself.
	if [ "$cur" = "=" ] && [ "$prev" = "--color" ]; then
		mapfile -t COMPREPLY < <(compgen -W "never always auto")
		return
	fi
	if [ "$prev" = "=" ] && [ "$COMP_CWORD" -gt 1 ] && [ "${COMP_WORDS[COMP_CWORD - 2]}" = "--color" ]; then
		mapfile -t COMPREPLY < <(compgen -W "never always auto" -- "$cur")
		return
	fi
	case $cur in
	--color=*)
		mapfile -t COMPREPLY < <(compgen -P "--color=" -W "never always auto" -- "${cur#--color=}")
		return
		;;
	esac

	# The command: the first word that is neither an option nor an option's argument.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-C | --directory) dir=${COMP_WORDS[i + 1]} ;;
		esac
		if [ -z "$cmd" ]; then
			case $w in
			-C | --directory | --python | --patch) ((i++)) ;;
			-*) ;;
			*) cmd=$w ;;
			esac
		elif [ "$cmd" = hook ] && [ -z "$sub" ]; then
			eval "case \$w in $_oeapatch_takes_arg) ((i++)) ;; -*) ;; *) sub=\$w ;; esac"
		fi
	done

	# An option's argument.
	case $prev in
	--patch)
		# The definitions bundled with this binary (what detection chooses
		# among: folders with a patch.ini), then directories.
		local exe patches=
		exe=$(command -v "$bin" 2>/dev/null) && patches=$(dirname "$exe")/../share/oeapatch/patches
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(
			[ -n "$patches" ] && for d in "$patches"/*/patch.ini; do
				[ -f "$d" ] && basename "$(dirname "$d")"
			done | grep -E "^${cur//[^A-Za-z0-9_-]/}"
			compgen -d -- "$cur"
		)
		return
		;;
	-C | --directory)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -d -- "$cur")
		return
		;;
	--python | --library | --junit | --env-file)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	--ref)
		mapfile -t COMPREPLY < <(compgen -W "$(_oeapatch_refs "$dir")" -- "$cur")
		return
		;;
	--only)
		mapfile -t COMPREPLY < <(compgen -W "post-merge post-checkout post-rewrite pre-push" -- "$cur")
		return
		;;
	-n | --max-count)
		return
		;;
	esac

	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_oeapatch_options "$bin" "$cmd")" -- "$cur")
		return
	fi
	case $cmd in
	"") mapfile -t COMPREPLY < <(compgen -W "$(_oeapatch_commands "$bin")" -- "$cur") ;;
	help) mapfile -t COMPREPLY < <(compgen -W "$(_oeapatch_commands "$bin")" -- "$cur") ;;
	hook) [ -z "$sub" ] && mapfile -t COMPREPLY < <(compgen -W "install uninstall status" -- "$cur") ;;
	check) mapfile -t COMPREPLY < <(compgen -W "$(_oeapatch_refs "$dir")" -- "$cur") ;;
	esac
}

complete -F _oeapatch oeapatch
