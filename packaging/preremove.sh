#!/bin/sh
# prerm of the haproxy-weighter .deb (nfpm "preremove"; dpkg passes remove, upgrade <new-version>,
# deconfigure, failed-upgrade <old-version>). Only a removal stops the service: an upgrade leaves
# it running and the new postinst restarts it (dh_installsystemd's prerm).
set -e

if [ -z "${DPKG_ROOT:-}" ] && [ "$1" = "remove" ] && [ -d /run/systemd/system ]; then
    deb-systemd-invoke stop haproxy-weighter.service >/dev/null || true
fi

exit 0
