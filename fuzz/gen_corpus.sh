#!/usr/bin/env bash
# fuzz/gen_corpus.sh [DIR] - (re)writes the seed corpus of fuzz_owner:
# valid owner documents, pairs "current RS expected" (0x1e between them),
# and one document per malformed class of DESIGN.md section 3. The files are
# checked in; run this only to change them. Needs jq.
set -eu
DIR=${1:-$(cd "$(dirname "$0")" && pwd)/corpus}
mkdir -p "$DIR"
rm -f "$DIR"/*

V='{"schema_version":1,"kind":"wslock-owner","token":"0123456789abcdef0123456789abcdef","operation_id":"20261130T112858Z-1a2b3c4d","purpose":"acquire","workspace_root":"/srv/ci/ws","host":"build-7","boot_id":"4a760414-a5f5-4c44-b75c-0e8b7c280e9a","pid":4242,"pid_start_ticks":118449,"identity_policy":"pid-start-boot","acquired_at":"2026-11-30T11:28:58.123Z","recovery_of":null}'
put() { printf '%s' "$2" >"$DIR/$1"; }
mod() { jq -c "$1" <<<"$V"; }

# Valid documents.
put valid-compact "$V"
printf '%s\n' "$V" >"$DIR/valid-newline"
jq --indent 2 . <<<"$V" >"$DIR/valid-pretty"
put valid-pid-only "$(mod '.boot_id = null | .pid_start_ticks = null | .identity_policy = "pid-only-fail-closed"')"
put valid-recovered "$(mod '.recovery_of = "fedcba9876543210fedcba9876543210" | .pid = 4194304 | .purpose = "run: make ünïcode ✓"')"
put valid-reordered "$(jq -cS . <<<"$V")"
put valid-escapes "$(mod '.purpose = "tab\u00e9 \"quoted\" back\\\\slash"')"
put valid-long-purpose "$(mod ".purpose = \"$(printf 'p%.0s' $(seq 128))\"")"
# Pairs: current RS expected.
printf '%s\x1e%s' "$V" "$(jq -S --indent 4 . <<<"$V")" >"$DIR/pair-equal-reordered"
printf '%s\x1e%s' "$V" "$(mod '.token = "0123456789abcdef0123456789abcdee"')" >"$DIR/pair-other-token"
printf '%s\x1e%s' "$V" "$(mod '.pid_start_ticks = 118450')" >"$DIR/pair-other-ticks"
printf '%s\x1e%s' "$V" "$(mod '.recovery_of = "0123456789abcdef0123456789abcdef"')" >"$DIR/pair-recovery-of"
printf '%s\x1e%s' "$V" '{"schema_version":1}' >"$DIR/pair-malformed-expected"

# Malformed, one per class (and a few variants).
put bad-empty ""
put bad-whitespace "   "
put bad-truncated "${V:0:120}"
put bad-truncated-end "${V:0:${#V}-1}"
put bad-trailing "$V x"
put bad-trailing-object "$V{}"
put bad-two-docs "$V$V"
put bad-duplicate-key "${V%\}},\"pid\":4243}"
put bad-duplicate-same "${V%\}},\"pid\":4242}"
put bad-extra-key "$(mod '.extra = true')"
put bad-missing-key "$(mod 'del(.recovery_of)')"
put bad-missing-token "$(mod 'del(.token)')"
put bad-type-pid-string "$(mod '.pid = "4242"')"
put bad-type-pid-float "${V/\"pid\":4242/\"pid\":4242.0}"
put bad-type-pid-exponent "${V/\"pid\":4242/\"pid\":4.242e3}"
put bad-type-schema-string "$(mod '.schema_version = "1"')"
put bad-type-token-number "$(mod '.token = 123')"
put bad-type-boot-id-bool "$(mod '.boot_id = true')"
put bad-type-ticks-negative "$(mod '.pid_start_ticks = -1')"
put bad-type-array "[$V]"
put bad-type-null "null"
put bad-pid-zero "$(mod '.pid = 0')"
put bad-pid-minus-one "$(mod '.pid = -1')"
put bad-pid-over-max "$(mod '.pid = 4194305')"
put bad-pid-huge "${V/\"pid\":4242/\"pid\":99999999999999999999999}"
put bad-pid-int64-min "${V/\"pid\":4242/\"pid\":-9223372036854775808}"
put bad-path-dotdot "$(mod '.workspace_root = "/srv/ci/../ws"')"
put bad-path-dot "$(mod '.workspace_root = "/srv/./ws"')"
put bad-path-trailing-slash "$(mod '.workspace_root = "/srv/ci/ws/"')"
put bad-path-double-slash "$(mod '.workspace_root = "/srv//ws"')"
put bad-path-relative "$(mod '.workspace_root = "srv/ws"')"
put bad-path-root "$(mod '.workspace_root = "/"')"
put bad-path-newline "$(mod '.workspace_root = "/srv/a\nb"')"
put bad-nul-escaped "$(mod '.purpose = "a\u0000b"')"
# Raw bytes: bash strings cannot hold NUL, so these are spliced by printf.
{ printf '%s' "${V%%acquire*}"; printf 'acq\0uire'; printf '%s' "${V#*acquire}"; } >"$DIR/bad-nul-raw"
{ printf '%s' "${V%%acquire*}"; printf 'acq\377uire'; printf '%s' "${V#*acquire}"; } >"$DIR/bad-utf8-invalid"
{ printf '%s' "${V%%acquire*}"; printf 'acq\355\240\200uire'; printf '%s' "${V#*acquire}"; } >"$DIR/bad-utf8-surrogate"
{ printf '%s' "${V%%acquire*}"; printf 'acq\300\257uire'; printf '%s' "${V#*acquire}"; } >"$DIR/bad-utf8-overlong"
put bad-escaped-surrogate "$(mod '.purpose = "x"' | sed 's/"purpose":"x"/"purpose":"\\ud800"/')"
put bad-kind "$(mod '.kind = "wslock-owners"')"
put bad-schema-2-v1-keys "$(mod '.schema_version = 2')"
put bad-schema-3 "$(mod '.schema_version = 3')"
# Version 2 (the four keys after workspace_root, host, pid_start_ticks).
V2=$(mod '{schema_version: 2, kind, token, operation_id, purpose, workspace_root,
	workspace_fs: "fsid:91f872ef092c6674", workspace_fs_path: "/ci/ws", host,
	machine_id: "3d1219c7c4c5404aaa1f6d2a48adfda4", boot_id, pid, pid_start_ticks,
	pid_namespace: "pid:[4026531836]", identity_policy, acquired_at, recovery_of}')
mod2() { jq -c "$1" <<<"$V2"; }
put valid-v2 "$V2"
put valid-v2-nulls "$(mod2 '.machine_id = null | .pid_namespace = null | .workspace_fs = "dev:253:0" | .workspace_fs_path = "/"')"
printf '%s\x1e%s' "$V" "$V2" >"$DIR/pair-v1-v2"
printf '%s\x1e%s' "$V2" "$(mod2 '.pid_namespace = "pid:[4026532178]"')" >"$DIR/pair-other-namespace"
put bad-v2-missing-namespace "$(mod2 'del(.pid_namespace)')"
put bad-v1-with-machine-id "$(mod '.machine_id = null')"
put bad-v2-fs "$(mod2 '.workspace_fs = "uuid:1234"')"
put bad-v2-fs-path "$(mod2 '.workspace_fs_path = "ci/ws"')"
put bad-v2-machine-id "$(mod2 '.machine_id = "3D1219C7C4C5404AAA1F6D2A48ADFDA4"')"
put bad-v2-namespace "$(mod2 '.pid_namespace = "net:[4026531840]"')"
put bad-token-upper "$(mod '.token = "0123456789ABCDEF0123456789ABCDEF"')"
put bad-token-short "$(mod '.token = "0123"')"
put bad-boot-id "$(mod '.boot_id = "not-a-boot-id"')"
put bad-time "$(mod '.acquired_at = "2026-13-30T11:28:58.123Z"')"
put bad-opid "$(mod '.operation_id = "-leading-dash"')"
put bad-purpose-empty "$(mod '.purpose = ""')"
put bad-purpose-control "$(mod '.purpose = "a\u0007b"')"
put bad-purpose-long "$(mod ".purpose = \"$(printf 'p%.0s' $(seq 129))\"")"
put bad-host-space "$(mod '.host = "build 7"')"
put bad-policy "$(mod '.identity_policy = "trust-me"')"
put bad-policy-needs-ids "$(mod '.boot_id = null')"
put bad-recovery-of "$(mod '.recovery_of = "nope"')"
# Larger than 64 KiB: valid JSON padded with white space after the object.
{ printf '%s' "$V"; head -c 65600 /dev/zero | tr '\0' ' '; } >"$DIR/bad-over-64k"
{ printf '%s' "${V%\}}"; printf ',"pad":"'; head -c 65600 /dev/zero | tr '\0' 'x'; printf '"}'; } >"$DIR/bad-over-64k-key"
# mountinfo lines (src/mountinfo.c's parser runs on every input without RS).
printf '36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw' >"$DIR/mountinfo-line"
printf '40 1 0:5 /a\\040b /with\\040space rw - tmpfs none rw' >"$DIR/mountinfo-escaped"
ls "$DIR" | wc -l
