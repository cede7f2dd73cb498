#!/bin/sh
# section.sh - the critical section of the fault suite, run as the command
# of `wslock run`.  It detects overlaps itself (markers) and writes to the
# fenced store with the fence it was given.
#
#   section.sh FX once    one short section
#   section.sh FX loop    sections back to back until FX/stop exists (or
#                         the process is stopped): a long-running holder
#   section.sh FX stubborn  like loop, but SIGTERM is ignored (noted in
#                         FX/termed): only SIGKILL ends it
#
# FX is the case's directory: FX/marks/ (one file per command inside its
# section, named by pid), FX/store/ (fenced_store.sh), FX/overlaps (one
# line per overlap seen), FX/sections (one line per section entered),
# FX/begun (created at the first section: a test waits for it).
# An overlap is another marker whose process is still alive: a holder that
# was killed leaves a marker of a dead pid, which does not count.
set -u
fx=$1 mode=${2:-once}
here=$(dirname "$0")
me=$$

check() {
	for m in "$fx"/marks/*; do
		[ -e "$m" ] || continue
		p=${m##*/}
		[ "$p" = "$me" ] && continue
		if kill -0 "$p" 2>/dev/null; then
			echo "overlap $me($WSLOCK_FENCE) with $p($(cat "$m" 2>/dev/null))" >>"$fx/overlaps"
		fi
	done
}

write() {
	"$here/fenced_store.sh" "$fx/store" "${WSLOCK_FENCE:-}" "$WSLOCK_TOKEN"
}

if [ "$mode" = stubborn ]; then
	trap ': >"$fx/termed"' TERM
fi
echo "$WSLOCK_FENCE" >"$fx/marks/$me"
check
# The first write of a new holder must be accepted: a rejection means its
# fence is not above an earlier holder's (the fence went backwards).
if ! write; then
	echo "regress $me fence ${WSLOCK_FENCE:-none}" >>"$fx/overlaps"
fi
echo "$me $WSLOCK_FENCE" >>"$fx/sections"
: >"$fx/begun"
if [ "$mode" != once ]; then
	while [ ! -e "$fx/stop" ]; do
		check
		write || :
		sleep 0.05
	done
else
	sleep 0.02
	check
	write || :
fi
rm -f "$fx/marks/$me"
