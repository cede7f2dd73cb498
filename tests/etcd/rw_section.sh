#!/bin/sh
# rw_section.sh - the critical section of the fault suite's shared storm,
# run as the command of `wslock run [--shared]`: readers may be inside
# together, a writer only alone.
#
#   rw_section.sh FX r|w
#
# FX/marks/ holds one file per command inside, named MODE.PID; an overlap
# is a live process's marker that this one may not meet (a writer beside
# anyone, a reader beside a writer), one line in FX/overlaps. A reader
# that meets another live reader notes it in FX/together (readers were
# inside at once). Every section adds a line "MODE PID" to FX/sections.
# A marker of a killed command (a dead pid) does not count.
set -u
fx=$1 mode=$2 me=$$

check() {
	for m in "$fx"/marks/*.*; do
		[ -e "$m" ] || continue
		n=${m##*/}
		k=${n%%.*} p=${n#*.}
		[ "$p" = "$me" ] && continue
		kill -0 "$p" 2>/dev/null || continue
		if [ "$mode" = w ] || [ "$k" = w ]; then
			echo "overlap $mode.$me with $n" >>"$fx/overlaps"
		else
			echo "$me $p" >>"$fx/together"
		fi
	done
}

: >"$fx/marks/$mode.$me"
check
sleep 0.15
check
rm -f "$fx/marks/$mode.$me"
echo "$mode $me" >>"$fx/sections"
