#!/usr/bin/env bash
# Fetch the HAProxy versions the integration tests run besides Debian 12's own 2.6
# (/usr/sbin/haproxy): 3.0 (trixie), 3.2 and 3.4 (whichever of sid, experimental and
# trixie-backports has that branch today), all from deb.debian.org, none installed.
#
#   tools/haproxy-versions.sh            fetch what is missing, write the wrappers, print versions
#   tools/haproxy-versions.sh --refresh  fetch everything again (sid and experimental move)
#
# Cache: $HAPROXY_VERSIONS_DIR, by default ${XDG_CACHE_HOME:-~/.cache}/haproxy-weighter/haproxy
# (internal/testenv looks in the same place):
#   trixie/            a trixie root: `debootstrap --download-only --variant=minbase
#                      --include=haproxy trixie`, every package extracted with dpkg-deb -x
#                      (no chroot, no maintainer scripts, no root needed); HAProxy 3.0 is its
#                      usr/sbin/haproxy, and its loader and libraries run the others
#   3.2/, 3.4/         `apt-get download haproxy=<version>` + dpkg-deb -x, from a temporary
#                      sources list and apt state (the system's apt setup is not touched)
#   bin/haproxy-3.X    wrappers: exec the trixie loader with the trixie library path on that
#                      binary, so a test runs `haproxy-3.2 -f cfg -db`
#   versions.txt       what was fetched: branch, Debian package version, suite
#
# Pinning: by branch, not by exact version. deb.debian.org keeps only the current upload of
# sid and experimental (snapshot.debian.org is not reachable from CI), so an exact pin would
# break every CI run after the next upload; the newest version of each branch is taken and
# recorded in versions.txt and on stdout. A branch the archive no longer has is an error.
#
# Needs: debootstrap, apt-get, dpkg-deb, flock (Debian 12: `apt-get install debootstrap`).
set -euo pipefail

mirror=http://deb.debian.org/debian
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cache=${HAPROXY_VERSIONS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/haproxy-weighter/haproxy}
# Where each fetched branch comes from: the trixie root for 3.0, these suites for the rest.
fetched_branches=(3.2 3.4)
suites=(sid experimental trixie-backports)

die() { echo "haproxy-versions: $*" >&2; exit 1; }
say() { echo "haproxy-versions: $*" >&2; }

refresh=false
case "${1:-}" in
"") ;;
--refresh) refresh=true ;;
*) die "usage: $0 [--refresh]" ;;
esac

for tool in debootstrap apt-get apt-cache dpkg-deb dpkg flock; do
	command -v "$tool" >/dev/null || die "$tool not found: apt-get install debootstrap (see docs/testing.md)"
done
[ -r "$keyring" ] || die "no $keyring: apt-get install debian-archive-keyring"

# The loader and library directories of the trixie root, per architecture.
arch=$(dpkg --print-architecture)
case "$arch" in
amd64) triplet=x86_64-linux-gnu loader=lib64/ld-linux-x86-64.so.2 ;;
arm64) triplet=aarch64-linux-gnu loader=lib/ld-linux-aarch64.so.1 ;;
*) die "architecture $arch: only amd64 and arm64 are set up" ;;
esac
case "$cache" in
*"'"* | *$'\n'*) die "cache directory $cache: a quote or newline in the path cannot go into the wrappers" ;;
esac

mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
# One fetch at a time per cache: two `make test` at once wait for each other.
exec 9>"$cache/.lock"
flock 9

work=$(mktemp -d "$cache/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# extract_all DEBDIR ROOT: dpkg-deb -x every package of DEBDIR into ROOT.
extract_all() {
	local deb n=0
	for deb in "$1"/*.deb; do
		[ -e "$deb" ] || die "no packages in $1"
		dpkg-deb -x "$deb" "$2" || die "dpkg-deb -x $deb failed"
		n=$((n + 1))
	done
	say "extracted $n packages ($(du -cm "$1"/*.deb | tail -1 | cut -f1) MB) into $2"
}

# fetch_root: the trixie root (HAProxy 3.0 and the libraries of every fetched version).
# --download-only resolves and downloads what minbase + haproxy need, checked against the
# archive's signed Release file; extracting them by hand needs no root and runs nothing.
fetch_root() {
	local target=$work/debootstrap root=$work/trixie
	say "debootstrap --download-only --variant=minbase --include=haproxy trixie (from $mirror)"
	debootstrap --download-only --variant=minbase --include=haproxy --arch="$arch" \
		--keyring="$keyring" trixie "$target" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
	mkdir "$root"
	extract_all "$target/var/cache/apt/archives" "$root"
	local deb
	deb=$(echo "$target"/var/cache/apt/archives/haproxy_*.deb)
	[ -f "$deb" ] || die "debootstrap did not fetch haproxy"
	echo "3.0 $(dpkg-deb -f "$deb" Version) trixie" >"$root/.haproxy-weighter-version"
	rm -rf "$cache/trixie"
	mv "$root" "$cache/trixie"
}

# apt_setup: a private apt for sid and friends: its own sources list, lists, status and cache
# (the system's are neither read nor written); the system's apt.conf.d still applies (a
# site's proxy, for one). Only the Packages index is fetched (target=Packages: no
# translations, no appstream metadata). Check-Valid-Until is off because sid's and
# experimental's Release files expire a week after signing and a mirror or proxy that lags
# (the one this was written behind served them 25 days old) would refuse them; their
# signatures are still checked.
apt_setup() {
	local a=$work/apt
	mkdir -p "$a"/{prefs,sources.d,lists/partial,cache/archives/partial}
	: >"$a/status"
	for s in "${suites[@]}"; do
		echo "deb [signed-by=$keyring target=Packages] $mirror $s main"
	done >"$a/sources.list"
	apt_opts=(
		-o "Dir::Etc::SourceList=$a/sources.list" -o "Dir::Etc::SourceParts=$a/sources.d"
		-o "Dir::Etc::Preferences=$a/none.pref" -o "Dir::Etc::PreferencesParts=$a/prefs"
		-o "Dir::State=$a" -o "Dir::State::Lists=$a/lists" -o "Dir::State::status=$a/status"
		-o "Dir::Cache=$a/cache" -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
		-o Debug::NoLocking=true -o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root
	)
	say "apt-get update (${suites[*]}, private state in $a)"
	apt-get "${apt_opts[@]}" -q update >"$work/apt-update.log" 2>&1 ||
		{ cat "$work/apt-update.log" >&2; die "apt-get update failed (log above)"; }
	if grep -E '^(W|E|Err):' "$work/apt-update.log" >&2; then
		die "apt-get update could not read every suite (above)"
	fi
}

# newest_of BRANCH: the newest haproxy version of BRANCH (3.2 → 3.2.x) the suites offer,
# as "version suite".
newest_of() {
	local branch=$1 best="" best_suite="" v suite
	while IFS='|' read -r _ v src; do
		v=${v// /}
		suite=$(echo "$src" | awk '{print $2}')
		suite=${suite%%/*}
		case "${v#*:}" in
		"$branch".*) ;;
		*) continue ;;
		esac
		if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then
			best=$v best_suite=$suite
		fi
	done < <(apt-cache "${apt_opts[@]}" madison haproxy)
	[ -n "$best" ] || die "no haproxy $branch.x in ${suites[*]} on $mirror today (apt-cache madison haproxy: $(apt-cache "${apt_opts[@]}" madison haproxy | awk -F'|' '{printf "%s;", $2}')); update fetched_branches in $0"
	echo "$best $best_suite"
}

# fetch_branch BRANCH: apt-get download + dpkg-deb -x of that branch's newest haproxy.
fetch_branch() {
	local branch=$1 newest version suite dir=$work/download/$1 deb
	newest=$(newest_of "$branch")
	read -r version suite <<<"$newest"
	say "apt-get download haproxy=$version ($suite)"
	mkdir -p "$dir"
	(cd "$dir" && apt-get "${apt_opts[@]}" -q download "haproxy=$version") >"$work/download-$branch.log" 2>&1 ||
		{ cat "$work/download-$branch.log" >&2; die "apt-get download haproxy=$version failed (log above)"; }
	deb=$(echo "$dir"/haproxy_*.deb)
	[ -f "$deb" ] || die "apt-get download haproxy=$version left no package"
	mkdir "$work/$branch"
	extract_all "$dir" "$work/$branch"
	echo "$branch $version $suite" >"$work/$branch/.haproxy-weighter-version"
	rm -rf "${cache:?}/$branch"
	mv "$work/$branch" "$cache/$branch"
}

# root_of BRANCH: the directory a fetched branch was extracted into.
root_of() {
	case "$1" in
	3.0) echo "$cache/trixie" ;;
	*) echo "$cache/$1" ;;
	esac
}
binary_of() { echo "$(root_of "$1")/usr/sbin/haproxy"; }

# write_wrapper BRANCH: bin/haproxy-BRANCH runs that binary with the trixie root's loader and
# libraries (Debian 12's glibc 2.36 is older than they need). --argv0 makes the wrapper the
# program's argv[0]: the master (-W) re-executes argv[0] on reload, and that must be the
# wrapper again, not the bare binary the system's loader cannot run.
write_wrapper() {
	local branch=$1 root=$cache/trixie w=$cache/bin/haproxy-$1
	cat >"$w.tmp" <<-EOF
		#!/bin/sh
		# HAProxy $(cut -d' ' -f2,3 "$(root_of "$branch")/.haproxy-weighter-version"), written by tools/haproxy-versions.sh.
		exec '$root/$loader' --argv0 '$w' \\
		  --library-path '$root/lib/$triplet:$root/usr/lib/$triplet' \\
		  '$(binary_of "$branch")' "\$@"
	EOF
	chmod 755 "$w.tmp"
	mv "$w.tmp" "$w"
}

if $refresh; then
	rm -rf "${cache:?}/trixie" "${cache:?}/bin" "${cache:?}/versions.txt"
	for b in "${fetched_branches[@]}"; do rm -rf "${cache:?}/$b"; done
fi

start=$SECONDS
[ -x "$cache/trixie/usr/sbin/haproxy" ] || { fetch_root; say "trixie root in $((SECONDS - start)) s"; }
need_apt=false
for b in "${fetched_branches[@]}"; do
	[ -x "$(binary_of "$b")" ] || need_apt=true
done
if $need_apt; then
	apt_setup
	for b in "${fetched_branches[@]}"; do
		[ -x "$(binary_of "$b")" ] || fetch_branch "$b"
	done
fi

mkdir -p "$cache/bin"
: >"$cache/versions.txt.tmp"
for b in 3.0 "${fetched_branches[@]}"; do
	write_wrapper "$b"
	# Each wrapper must run and say it is its branch: a library the trixie root lacks, or a
	# branch that moved, fails here rather than in every test.
	v=$("$cache/bin/haproxy-$b" -v 2>"$work/stderr-$b") ||
		{ cat "$work/stderr-$b" >&2; die "$cache/bin/haproxy-$b -v failed (above)"; }
	first=$(echo "$v" | head -1)
	case "$first" in
	"HAProxy version $b".*) ;;
	*) die "$cache/bin/haproxy-$b -v says \"$first\", not HAProxy $b" ;;
	esac
	echo "$cache/bin/haproxy-$b: $first"
	cat "$(root_of "$b")/.haproxy-weighter-version" >>"$cache/versions.txt.tmp"
done
mv "$cache/versions.txt.tmp" "$cache/versions.txt"
say "ready in $((SECONDS - start)) s: $(tr '\n' ';' <"$cache/versions.txt")"
