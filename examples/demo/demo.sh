#!/usr/bin/env bash
# `make demo`: check the tools it needs, build, run the demo (~2 minutes), then check that
# no process of the demo is left behind. Extra arguments go to the demo program
# (e.g. `make demo DEMO_ARGS="-phase1 20s -phase2 30s"`).
#
# The picture goes to $DEMO_PNG, by default bin/demo.png (ignored by git, so the tree stays
# clean); `make demo DEMO_PNG=examples/demo/demo.png` refreshes the one the README shows.
# A relative DEMO_PNG is relative to the repository's root.
set -euo pipefail
case $0 in # the repository's root (no dirname: the tool check below must run on any PATH)
*/*) cd "${0%/*}/../.." ;;
*) cd ../.. ;;
esac
GO=${GO:-go}
png=${DEMO_PNG:-bin/demo.png}

# A missing tool fails here, naming its Debian package, before anything is built or started.
missing=() packages=()
need() { # need TOOL PACKAGE [FALLBACK_PATH]: TOOL on PATH (or at FALLBACK_PATH)
    command -v "$1" >/dev/null && return
    [ -n "${3:-}" ] && [ -x "$3" ] && return
    missing+=("$1") packages+=("$2")
}
need pgrep procps
need haproxy haproxy /usr/sbin/haproxy # Debian's sbin is often not on a user's PATH
if [ ${#missing[@]} -gt 0 ]; then
    echo "make demo: missing ${missing[*]}: install with" >&2
    echo "    apt-get install ${packages[*]}" >&2
    echo "(or the README's apt-get line, which has everything make demo and make test need)" >&2
    exit 1
fi
if ! command -v "$GO" >/dev/null; then
    echo "make demo: $GO not found: install Go (see go.mod for the version) and put /usr/local/go/bin on PATH" >&2
    exit 1
fi
# pgrep must see this script's own process, or the check at the end could not see the demo's
# (e.g. /proc not mounted).
if ! pgrep -f -- "${0##*/}" >/dev/null; then
    echo "make demo: pgrep cannot see running processes (is /proc mounted?)" >&2
    exit 1
fi

"$GO" build -o bin/haproxy-weighter-demo ./examples/demo
mkdir -p "$(dirname "$png")"
dir=$(mktemp -d "${TMPDIR:-/tmp}/haproxy-weighter-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT
status=0
bin/haproxy-weighter-demo -weighter bin/haproxy-weighter -dir "$dir" -out "$png" "$@" || status=$?

# Every process the demo started has its work dir on its command line.
# pgrep: 0 = found some, 1 = none, anything else = pgrep itself failed.
left_status=0
left=$(pgrep -a -f -- "$dir") || left_status=$?
case $left_status in
0)
    echo "demo left processes behind:" >&2
    echo "$left" >&2
    exit 1
    ;;
1) echo "no demo process left behind" ;;
*)
    echo "make demo: pgrep failed (exit $left_status): cannot tell whether the demo left processes" >&2
    exit 1
    ;;
esac
exit "$status"
