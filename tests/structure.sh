#!/bin/sh
# structure.sh - the source layout rules of DESIGN.md section 7, checked:
#
#  (a) no src/*.c longer than MAX_LINES (900) lines;
#  (b) no cycle between modules in the include graph of src/;
#  (c) every lock-rule function that src/lockrules.h declares is defined
#      in src/lockrules.c and nowhere else;
#  (d) when the objects are built (src/*.o, as `make check-structure`
#      builds them): no cycle between modules in the graph of which object
#      uses a symbol that which other object defines (nm -u / nm
#      --defined-only), that is, no two modules calling each other.
#
# A module is a .c file with its header of the same name; a module split
# over several files that share a private header is one module (MODULES
# below): a call between its files is not a dependency between modules.
#
# Usage: tests/structure.sh [SRC_DIR]   (default: src beside this script)
# Prints each violation and exits 1 when there is one, else prints nothing
# and exits 0.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=${1:-"$here/../src"}
MAX_LINES=${MAX_LINES:-900}

# module: the files (stems) that form it; unlisted stems are their own module.
MODULES='
registry: registry registry_backend
local: registry_local local_open local_wait local_queue local_markers local_list local_garbage local_upgrade local_shared local_multi local_prestage
etcd_backend: registry_etcd registry_etcd_read registry_etcd_write registry_etcd_queue registry_etcd_watch registry_etcd_nest registry_etcd_shared registry_etcd_shared_leave registry_etcd_multi
etcd: etcd etcd_impl etcd_kv etcd_watch
'

fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# stem -> module
printf '%s\n' "$MODULES" | awk -F'[: ]+' 'NF > 1 { for (i = 2; i <= NF; i++) if ($i != "") print $i, $1 }' \
	> "$tmp/map"

# (a) file length
for f in "$src"/*.c; do
	n=$(wc -l < "$f")
	if [ "$n" -gt "$MAX_LINES" ]; then
		echo "structure: ${f#"$src"/} has $n lines (at most $MAX_LINES: split it by concern)"
		fail=1
	fi
done

# Prints the cycles of the edge list "from to why" on stdin (one per
# strongly connected component of two or more modules, with the edges
# inside it), prefixed with $1; exits 1 when there is one.
cycles() {
	awk -v what="$1" '
	function visit(v,   i, w) {
		idx[v] = low[v] = ++counter
		stack[++sp] = v; on[v] = 1
		for (i = 1; i <= nout[v]; i++) {
			w = out[v, i]
			if (!(w in idx)) {
				visit(w)
				if (low[w] < low[v]) low[v] = low[w]
			} else if (on[w] && idx[w] < low[v]) {
				low[v] = idx[w]
			}
		}
		if (low[v] == idx[v]) {
			n = 0
			do { w = stack[sp--]; on[w] = 0; comp[++n] = w; in_comp[w] = ncomp + 1 } while (w != v)
			ncomp++
			if (n > 1) {
				found = 1
				line = ""
				for (i = n; i >= 1; i--) line = line (line == "" ? "" : " ") comp[i]
				print "structure: " what " cycle between modules: " line
				for (e = 1; e <= nedges; e++)
					if (in_comp[ef[e]] == ncomp && in_comp[et[e]] == ncomp)
						print "    " ef[e] " -> " et[e] " (" ew[e] ")"
			}
		}
	}
	{
		why = $0; sub(/^[^ ]+ [^ ]+ /, "", why)
		key = $1 SUBSEP $2
		if (!(key in seen)) {
			seen[key] = ++nedges; ef[nedges] = $1; et[nedges] = $2; ew[nedges] = why
			out[$1, ++nout[$1]] = $2
			nodes[$1] = 1; nodes[$2] = 1
		} else if (index(", " ew[seen[key]] ", ", ", " why ", ") == 0 &&
			   length(ew[seen[key]]) < 100) {
			ew[seen[key]] = ew[seen[key]] ", " why
		}
	}
	END {
		for (v in nodes) if (!(v in idx)) visit(v)
		exit found
	}'
}

# (b) includes: "module-of-file module-of-header file"
for f in "$src"/*.c "$src"/*.h; do
	stem=$(basename "$f"); stem=${stem%.*}
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$f" |
	while read -r h; do
		[ -f "$src/$h.h" ] || continue
		printf '%s %s %s\n' "$stem" "$h" "$(basename "$f")"
	done
done > "$tmp/inc.raw"
awk 'NR == FNR { m[$1] = $2; next }
     { a = ($1 in m) ? m[$1] : $1; b = ($2 in m) ? m[$2] : $2
       if (a != b) print a, b, "#include in " $3 }' "$tmp/map" "$tmp/inc.raw" > "$tmp/inc"
cycles include < "$tmp/inc" || fail=1

# (c) lock rules defined once, in lockrules.c
rules=$(sed -n 's/^[a-z].*[ *]\(lock[a-z_]*\)(.*/\1/p' "$src/lockrules.h" | sort -u)
for r in $rules; do
	defs=$(grep -l "^[a-z][^;]*[ *]$r(" "$src"/*.c 2>/dev/null | sed "s|^$src/||" | tr '\n' ' ')
	case "$defs" in
	"lockrules.c ") ;;
	"") echo "structure: $r (lockrules.h) is defined nowhere"; fail=1 ;;
	*) echo "structure: $r (lockrules.h) is defined in ${defs% } (only lockrules.c may)"; fail=1 ;;
	esac
done

# (d) symbols, when the objects exist
if ls "$src"/*.o > /dev/null 2>&1 && command -v nm > /dev/null; then
	for o in "$src"/*.o; do
		stem=$(basename "$o" .o)
		[ -f "$src/$stem.c" ] || continue	# left from a removed file
		nm --defined-only "$o" | awk -v s="$stem" '$2 ~ /^[TDRBCG]$/ { print "def", s, $3 }'
		nm -u "$o" | awk -v s="$stem" '{ print "use", s, $NF }'
	done > "$tmp/sym"
	awk 'NR == FNR { m[$1] = $2; next }
	     $1 == "def" { d[$3] = $2; next }
	     { u[++n] = $2 " " $3 }
	     END { for (i = 1; i <= n; i++) {
			split(u[i], p, " ")
			if (!(p[2] in d)) continue
			a = (p[1] in m) ? m[p[1]] : p[1]; b = (d[p[2]] in m) ? m[d[p[2]]] : d[p[2]]
			if (a != b) print a, b, p[2] } }' "$tmp/map" "$tmp/sym" | sort > "$tmp/calls"
	cycles symbol < "$tmp/calls" || fail=1
fi

exit $fail
