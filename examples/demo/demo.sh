#!/usr/bin/env bash
# `make demo`: install HAProxy if missing, build, run the demo (~2 minutes), then check
# that no process of the demo is left behind. Extra arguments go to the demo program
# (e.g. `make demo DEMO_ARGS="-phase1 20s -phase2 30s"`).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}

if ! command -v haproxy >/dev/null && [ ! -x /usr/sbin/haproxy ]; then
    echo "HAProxy is missing: installing it with apt-get"
    SUDO=
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends haproxy >/dev/null
    # Debian starts its own haproxy.service; the demo runs its own HAProxy on free ports.
fi

"$GO" build -o bin/haproxy-weighter-demo ./examples/demo
dir=$(mktemp -d /tmp/haproxy-weighter-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
status=0
bin/haproxy-weighter-demo -weighter bin/haproxy-weighter -dir "$dir" -out examples/demo/demo.png "$@" || status=$?

# Every process the demo started has its work dir on its command line.
if left=$(pgrep -a -f "$dir"); then
    echo "demo left processes behind:" >&2
    echo "$left" >&2
    exit 1
fi
echo "no demo process left behind"
exit "$status"
