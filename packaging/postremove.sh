#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
if [ "$1" = "purge" ] && getent passwd haproxy-weighter >/dev/null; then
    deluser --system haproxy-weighter >/dev/null 2>&1 || userdel haproxy-weighter || true
fi
