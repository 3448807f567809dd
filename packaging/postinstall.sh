#!/bin/sh
# Create the service user; it reaches HAProxy's admin socket through the haproxy group
# (SupplementaryGroups in the unit).
set -e
if ! getent passwd haproxy-weighter >/dev/null; then
    adduser --system --group --no-create-home --home /nonexistent \
        --gecos "haproxy-weighter" haproxy-weighter >/dev/null 2>&1 ||
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin haproxy-weighter
fi
if getent group haproxy >/dev/null; then
    usermod -a -G haproxy haproxy-weighter || true
fi
chown root:haproxy-weighter /etc/haproxy-weighter/config.yaml
chmod 0640 /etc/haproxy-weighter/config.yaml
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
