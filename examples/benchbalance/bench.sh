#!/usr/bin/env bash
# `make bench-balance`: check the tools it needs, build the harness, run it (3 seeds × 5 min,
# about 16 min), then check that no process it started is left behind. Extra arguments go
# to the harness (e.g. `make bench-balance BENCH_ARGS="-seeds 1 -duration 2m"`); the
# result is printed and written to bin/bench-balance.txt.
set -euo pipefail
case $0 in # the repository's root
*/*) cd "${0%/*}/../.." ;;
*) cd ../.. ;;
esac
GO=${GO:-go}

missing=() packages=()
need() { # need TOOL PACKAGE [FALLBACK_PATH]: TOOL on PATH (or at FALLBACK_PATH)
    command -v "$1" >/dev/null && return
    [ -n "${3:-}" ] && [ -x "$3" ] && return
    missing+=("$1") packages+=("$2")
}
need pgrep procps
need haproxy haproxy /usr/sbin/haproxy
need prometheus prometheus /usr/bin/prometheus
if [ ${#missing[@]} -gt 0 ]; then
    echo "make bench-balance: missing ${missing[*]}: install with" >&2
    echo "    sudo apt-get install --no-install-recommends ${packages[*]}" >&2
    exit 1
fi
if ! pgrep -f -- "${0##*/}" >/dev/null; then
    echo "make bench-balance: pgrep cannot see running processes (is /proc mounted?)" >&2
    exit 1
fi

"$GO" build -o bin/haproxy-weighter-benchbalance ./examples/benchbalance
dir=$(mktemp -d "${TMPDIR:-/tmp}/haproxy-weighter-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
status=0
bin/haproxy-weighter-benchbalance -weighter bin/haproxy-weighter -readme README.md -dir "$dir" "$@" || status=$?

# Every process the harness started has a path inside its work dir on its command line: this
# one, or the -dir given in the arguments (kept, for its traces), which overrides it. Inside:
# "$work/", as make and this script have the -dir itself among their arguments.
work=$dir
prev=
for arg in "$@"; do
    case $prev in -dir | --dir) work=$arg ;; esac
    case $arg in -dir=* | --dir=*) work=${arg#*=} ;; esac
    prev=$arg
done
left_status=0
left=$(pgrep -a -f -- "${work%/}/") || left_status=$?
case $left_status in
0)
    echo "bench-balance left processes behind:" >&2
    echo "$left" >&2
    exit 1
    ;;
1) echo "no bench-balance process left behind" ;;
*)
    echo "make bench-balance: pgrep failed (exit $left_status)" >&2
    exit 1
    ;;
esac
exit "$status"
