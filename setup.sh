#!/usr/bin/env bash
# Sets up nettop on a fresh Debian 12 machine, then runs it or its tests.
#   ./setup.sh run [nettop args...]   install everything, then start nettop
#   ./setup.sh test [pytest args...]  install everything, then run the whole test suite
# Idempotent: a second run only checks what is already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
mode=${1:-run}
shift || true

debs=(python3 python3-venv python3-pip iproute2 ethtool iperf3 tmux htop iputils-ping procps sosreport)
# the tests start a real Prometheus server against `nettop serve` (tests/test_serve_prometheus.py)
# and apply `nettop persist --format udev` .link files with udevadm (tests/test_fleet_lab.py)
# and render the man page with man-db (tests/test_cli_conventions.py); the units are checked
# with systemd-analyze, setpriv and strace, serve's TLS with a certificate from openssl
# (tests/test_units.py, tests/test_serve_webconfig.py)
# the SSH lab (tests/ssh_lab.py) runs its own sshd in a namespace, with a config of its own
if [ "$mode" = test ]; then debs+=(prometheus udev man-db systemd util-linux strace openssl openssh-server openssh-client); fi
if [ "$(id -u)" = 0 ]; then
  debs+=(python3-bpfcc "linux-headers-$(dpkg --print-architecture)")
  missing=()
  for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq
    # installing a daemon's package must not start it on this host (the host's own sshd
    # stays as it was): invoke-rc.d asks policy-rc.d, and 101 means "do not start"
    guard=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      guard=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\nexit 101\n' > "$guard" && chmod 755 "$guard"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ -z "$guard" ] || rm -f "$guard"
  fi
  # bcc compiles against /lib/modules/$(uname -r)/build. Real hosts install the matching
  # linux-headers package; a kernel without one (as in CI) gets Debian's headers linked in.
  kdir=/lib/modules/$(uname -r)
  if [ ! -e "$kdir/build" ]; then
    hdr=$(ls -d /usr/src/linux-headers-*-"$(dpkg --print-architecture)" 2>/dev/null | sort -V | tail -n 1 || true)
    common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$hdr" ]; then
      mkdir -p "$kdir"
      ln -sfn "$hdr" "$kdir/build"
      [ -n "$common" ] && ln -sfn "$common" "$kdir/source"
      echo "setup: linked $hdr as $kdir/build (no matching headers for $(uname -r))" >&2
    fi
  fi
else
  echo "setup: not root: skipping Debian packages (needs ${debs[*]})" >&2
fi

# Debian's python3-bpfcc lives in the system Python's dist-packages, so the venv is made
# from /usr/bin/python3 with --system-site-packages. The PyPI package named "bcc" is unrelated.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(0 if sys.base_prefix.startswith("/usr") else 1)'; then
  rm -rf .venv
  "$py" -m venv --system-site-packages .venv
fi
stamp=.venv/.nettop-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # setuptools >= 77 reads pyproject's SPDX `license` string; Debian 12's is older, and
  # the wheel test builds without isolation against the venv's own
  .venv/bin/pip install -q --upgrade pip "setuptools>=77" >/dev/null
  .venv/bin/pip install -q -e ".[test]"
  touch "$stamp"
fi
# nettop(1) is generated from the parser, so it is rewritten on every run: .venv/share/man,
# which `man nettop` finds while .venv/bin is on PATH
.venv/bin/nettop man --install

case "$mode" in
  run)  exec .venv/bin/nettop "$@" ;;
  test) exec .venv/bin/python -m pytest "$@" ;;
  setup) exit 0 ;;
  *) echo "usage: ./setup.sh run|test|setup [args...]" >&2; exit 2 ;;
esac
