#!/bin/sh
# postinst of the haproxy-weighter .deb (nfpm "postinstall"; dpkg passes its arguments:
# configure [<last-configured-version>], abort-upgrade, abort-remove, abort-deconfigure).
#
# The systemd part is what dh_installsystemd --no-enable --no-start generates: a fresh install
# neither enables nor starts the service (the shipped config names a placeholder backend; edit
# it, then `systemctl enable --now haproxy-weighter`); an upgrade keeps the service enabled if
# it was, and restarts it if it runs (try-restart).
set -e

unit=haproxy-weighter.service
conf=/etc/haproxy-weighter/config.yaml

if [ "$1" = "configure" ]; then
    # The service user; it reaches HAProxy's admin socket through the haproxy group
    # (SupplementaryGroups in the unit).
    if ! getent passwd haproxy-weighter >/dev/null; then
        adduser --system --quiet --group --no-create-home --home /nonexistent haproxy-weighter
    fi
    if getent group haproxy >/dev/null; then
        adduser --quiet haproxy-weighter haproxy >/dev/null
    else
        # systemd does not start a unit whose supplementary group does not exist (216/GROUP).
        echo "haproxy-weighter: no group haproxy (the haproxy package makes it): until there is one, the unit's SupplementaryGroups=haproxy keeps the service from starting;" >&2
        echo "haproxy-weighter: without a local HAProxy (IPVS, a host:port socket), clear it: systemctl edit haproxy-weighter, then [Service] SupplementaryGroups=" >&2
    fi
    # The config may hold source credentials: readable by the service user only; an
    # administrator's dpkg-statoverride wins.
    if ! dpkg-statoverride --list "$conf" >/dev/null 2>&1; then
        chown root:haproxy-weighter "$conf"
        chmod 0640 "$conf"
    fi
fi

if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ] || [ "$1" = "abort-deconfigure" ] || [ "$1" = "abort-remove" ]; then
    if deb-systemd-helper debian-installed "$unit"; then
        # Undo the mask that postrm sets on remove (not a mask the administrator set).
        deb-systemd-helper unmask "$unit" >/dev/null || true
        if deb-systemd-helper --quiet was-enabled "$unit"; then
            # Still enabled: create any symlinks a changed [Install] section adds.
            deb-systemd-helper enable "$unit" >/dev/null || true
        fi
    elif [ "$1" = "configure" ] && [ -n "$2" ]; then
        # The package being replaced predates this script: its prerm stopped and disabled the
        # service on every upgrade, so whether it was enabled is lost.
        echo "haproxy-weighter: the package replaced ($2) stopped and disabled haproxy-weighter.service;" >&2
        echo "haproxy-weighter: if it was running, run: systemctl enable --now haproxy-weighter" >&2
    fi
    # Record the unit's symlinks so purge removes them, enabled by us or by the administrator.
    deb-systemd-helper update-state "$unit" >/dev/null || true

    if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
        systemctl --system daemon-reload >/dev/null || true
        if [ -n "$2" ]; then
            deb-systemd-invoke try-restart "$unit" >/dev/null || true
        fi
    fi
fi

exit 0
