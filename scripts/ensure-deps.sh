#!/bin/sh
# Installs what the gateway needs when it is missing, then returns: bun (from npm); bubblewrap, slirp4netns,
# nftables (the sandboxes' egress filter), postgresql (the tests' second engine), e2fsprogs (each sandbox's disk image), util-linux and mount (setpriv,
# unshare, nsenter, flock, losetup), iproute2, chromium (the dashboard's browser tests) and the Python client's python3
# packages from Debian; the project's packages; and the dashboard's built assets. Safe to run every time; quiet when
# all is there.
set -e
cd "$(dirname "$0")/.."

BUN_VERSION=1.4.4
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

if ! command -v bun >/dev/null 2>&1 || [ "$(bun --version 2>/dev/null)" != "$BUN_VERSION" ]; then
  echo "ensure-deps: installing bun@$BUN_VERSION from npm" >&2
  $SUDO npm install -g "bun@$BUN_VERSION" --no-fund --no-audit >&2
fi

missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v slirp4netns >/dev/null 2>&1 || missing="$missing slirp4netns"
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || missing="$missing iproute2"
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing="$missing nftables"
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || missing="$missing e2fsprogs"
for tool in setpriv unshare nsenter flock mountpoint; do
  command -v $tool >/dev/null 2>&1 || [ -x /usr/sbin/$tool ] || [ -x /sbin/$tool ] || { missing="$missing util-linux"; break; }
done
command -v losetup >/dev/null 2>&1 || [ -x /usr/sbin/losetup ] || [ -x /sbin/losetup ] || missing="$missing mount"
command -v python3 >/dev/null 2>&1 || [ -x /usr/bin/python3 ] || missing="$missing python3"
# The Python client (clients/python) and its tests, on Debian's python3 only (no PyPI): httpx, pytest, venv and
# pip to install it into a virtual environment, setuptools and wheel to build it, mypy to check its types.
for module in httpx:python3-httpx pytest:python3-pytest mypy:python3-mypy ensurepip:python3-venv pip:python3-pip setuptools:python3-setuptools wheel:python3-wheel; do
  /usr/bin/python3 -c "import ${module%%:*}" >/dev/null 2>&1 || missing="$missing ${module#*:}"
done
# The OCI tests build their images from a static busybox (an image without glibc); ldd finds what the agent
# needs from the host in images (libc-bin, always there on Debian).
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || missing="$missing busybox-static"
# Chromium for the dashboard's browser tests (test/dashboard/, driven by playwright-core; no browser download).
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || missing="$missing chromium"
# PostgreSQL for the second run of the suites (DATABASE_URL engine): initdb, pg_ctl, postgres, psql.
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
# The sandboxes' desktops (computer use; ARCHITECTURE.md §5): a display server (Xvnc serves VNC too, for the live
# view; Xvfb where it is not), a window manager, a terminal and a browser, input (xdotool), recordings and JPEG
# screenshots (ffmpeg, with ffprobe for the tests), noVNC with websockify (the live view), fonts, and scrot (the
# screenshots of E2B's desktop template, which the E2B emulator serves). Jails see them through the host's
# read-only /usr.
for tool in Xvnc Xvfb xdotool ffmpeg ffprobe openbox xterm chromium websockify scrot; do
  command -v $tool >/dev/null 2>&1 || { missing="$missing tigervnc-standalone-server xvfb xdotool ffmpeg openbox xterm chromium x11-utils novnc python3-websockify fonts-dejavu-core xfonts-base scrot"; break; }
done
if [ -n "$missing" ]; then
  echo "ensure-deps: installing$missing from Debian" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
fi

if [ ! -d node_modules ] || [ bun.lock -nt node_modules/.ensure-stamp ]; then
  echo "ensure-deps: installing packages" >&2
  bun install --frozen-lockfile >&2
  touch node_modules/.ensure-stamp
fi

# The dashboard's assets (web/ → web/dist/bundle.ts, which the server imports), rebuilt when a source changed.
bun scripts/build-web.ts --if-stale >&2
