#!/bin/sh
# fenced_store.sh - a storage service that honours fencing tokens, for the
# fault suite: it accepts a write only if its fence is not lower than any
# fence it has accepted before.
#
#   fenced_store.sh STORE FENCE TOKEN    one write; exit 0 accepted, 1 rejected
#
# STORE is a directory (created by the caller).  Under a kernel lock on
# STORE/lock it keeps the highest fence accepted and the token that wrote it
# (STORE/max) and appends one line per write to STORE/log:
#   accept FENCE TOKEN      a write the store took
#   reject FENCE TOKEN      a stale write the fence stopped (fencing at work)
#   stale FENCE TOKEN       accepted although stale: the fence equals the
#                           highest one seen but another holder wrote it
#                           (two holders with one fence), or no fence at all
# The fault suite requires zero "stale" lines.
set -eu
[ $# -eq 3 ] || { echo "usage: fenced_store.sh STORE FENCE TOKEN" >&2; exit 2; }
store=$1 fence=$2 token=$3
exec 9>>"$store/lock"
flock 9
max=0 maxtok=
[ -s "$store/max" ] && read -r max maxtok <"$store/max"
case "$fence" in
''|*[!0-9]*)
	echo "stale none $token" >>"$store/log"
	exit 0
	;;
esac
if [ "$fence" -lt "$max" ]; then
	echo "reject $fence $token" >>"$store/log"
	exit 1
fi
if [ "$fence" -eq "$max" ] && [ "$token" != "$maxtok" ]; then
	echo "stale $fence $token" >>"$store/log"
	exit 0
fi
echo "$fence $token" >"$store/max"
echo "accept $fence $token" >>"$store/log"
