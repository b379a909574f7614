#!/usr/bin/env bash
# Install the Debian packages the test suite needs beyond Python, when missing:
#   postgresql  tests/test_gradebook_postgres.py starts its own server (initdb, pg_ctl)
#   chromium    tests/test_formgrader.py loads the formgrader in headless Chromium
# Idempotent: when every package is installed it only checks, and apt is not touched.
# Needs root (CI runs it as root; elsewhere run it with sudo).
set -euo pipefail

packages=(postgresql chromium)

missing=()
for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = "installed" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "ci_system_packages: already installed: ${packages[*]}"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ci_system_packages: missing ${missing[*]}; run this script as root (sudo $0)" >&2
    exit 1
fi

echo "ci_system_packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

# Debian's postgresql package starts a cluster service where it can; the tests run
# their own server, so a service that did start is harmless and is left alone.
for pkg in "${missing[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [ "$status" != "installed" ]; then
        echo "ci_system_packages: $pkg is still not installed" >&2
        exit 1
    fi
done
echo "ci_system_packages: installed ${missing[*]}"
