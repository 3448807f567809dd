#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl stop haproxy-weighter.service 2>/dev/null || true
    systemctl disable haproxy-weighter.service 2>/dev/null || true
fi
