#!/bin/sh
# postrm of the haproxy-weighter .deb (nfpm "postremove"; dpkg passes remove, purge,
# upgrade <new-version>, failed-upgrade, abort-install, abort-upgrade, disappear).
#
# remove: mask the unit (its file is gone; the enable symlinks stay, as the administrator's
# configuration, until purge) and reload systemd, as dh_installsystemd does.
# purge: remove the enable symlinks and the mask, then the service user. dpkg itself deletes the
# conffile /etc/haproxy-weighter/config.yaml and its directory.
set -e

unit=haproxy-weighter.service

if [ "$1" = "remove" ] && command -v deb-systemd-helper >/dev/null; then
    deb-systemd-helper mask "$unit" >/dev/null || true
fi

if [ "$1" = "purge" ] && command -v deb-systemd-helper >/dev/null; then
    deb-systemd-helper purge "$unit" >/dev/null || true
    deb-systemd-helper unmask "$unit" >/dev/null || true
fi

if [ "$1" = "remove" ] && [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi

if [ "$1" = "purge" ]; then
    # deluser's chatter (no crontab to clean without cron, ...) is dropped; a failure is reported.
    if getent passwd haproxy-weighter >/dev/null && command -v deluser >/dev/null; then
        deluser --system --quiet haproxy-weighter >/dev/null 2>&1 ||
            echo "haproxy-weighter: could not remove the user haproxy-weighter" >&2
    fi
    if getent group haproxy-weighter >/dev/null && command -v delgroup >/dev/null; then
        delgroup --system --quiet haproxy-weighter >/dev/null 2>&1 ||
            echo "haproxy-weighter: could not remove the group haproxy-weighter" >&2
    fi
fi

exit 0
