
# How to undo what git just did, printed when the patch failed after it
# ($rollback is set per hook below); the patch goes back on with apply.
rollback_hint() {
	if [ -n "$rollback" ]; then
		echo "to roll back to where the patch held: $rollback && '$oeapatch' apply -C '$dir'"
	else
		echo "fix: '$oeapatch' apply -C '$dir' && '$oeapatch' verify -C '$dir'"
	fi
}

# What the post-* hooks do: (re-apply and) verify the work tree. git has
# already changed it, so they cannot block; they exit non-zero and shout.
act() {
	can_run || return 1
	if [ "$reapply" = 1 ]; then
		if [ -n "$library" ]; then
			out=$("$oeapatch" apply --refresh -C "$dir" --patch "$patch" --library "$library" 2>&1)
		else
			out=$("$oeapatch" apply --refresh -C "$dir" --patch "$patch" 2>&1)
		fi
		if [ $? -ne 0 ]; then
			printf '%s\n' "$out" >&2
			shout "re-applying $patch FAILED in $dir" \
				"the server would start WITHOUT the patch: do not restart it before this is fixed" \
				"see above for the anchor that failed; 'oeapatch check -C $dir HEAD' tells the same" \
				"$(rollback_hint)"
			return 1
		fi
		printf '%s\n' "$out" | sed -n '1s/^/oeapatch: /p' >&2
	fi
	if ! out=$("$oeapatch" verify -C "$dir" --patch "$patch" 2>&1); then
		printf '%s\n' "$out" >&2
		shout "$patch does NOT verify in $dir" \
			"the server would start without the patch (or with half of it): do not restart it" \
			"$(rollback_hint)"
		return 1
	fi
	echo "oeapatch: $hook: $patch verified in $dir" >&2
}

# Whether the patch holds in the work tree, recorded per worktree by these
# hooks and by apply and revert (oeapatch-hook.state): post-checkout speaks
# only when a checkout changed it.
gitdir=${GIT_DIR:-$(git rev-parse --git-dir 2>/dev/null)}
record=${gitdir:+$gitdir/oeapatch-hook.state}
state_now() {
	if [ -x "$oeapatch" ] && "$oeapatch" status -C "$dir" --patch "$patch" >/dev/null 2>&1; then
		echo verified
	else
		echo not-verified
	fi
}
remember() {
	[ -n "$record" ] && { state_now > "$record"; } 2>/dev/null
	return 0
}
