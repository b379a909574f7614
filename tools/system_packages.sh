#!/usr/bin/env bash
# The Debian packages the course needs beyond Python, installed when missing.
#   tools/system_packages.sh book   what `make book` needs: Python's venv (python3-venv where Python is Debian's)
#   tools/system_packages.sh test   what `make test` needs besides: postgresql (tests/test_gradebook_postgres.py
#                                   starts its own server), chromium (the browser tests, headless) and
#                                   bubblewrap (the OS fence around the grading kernel), and Node.js where
#                                   none is installed (the class hub's proxy, tests/hub)
#   tools/system_packages.sh grade  what `make grade` needs besides: bubblewrap
#   tools/system_packages.sh hub    what `make hub` needs besides: bubblewrap, and Debian's nodejs and npm
#                                   where no Node.js is installed (the hub's proxy)
# Idempotent: when everything is there it only checks, and apt is not touched. As root it installs
# what is missing with apt-get; otherwise it stops with one line naming the packages and the command
# to run, before any test starts.
set -euo pipefail

what=${1:-test}
case "$what" in
    book) packages=() ;;
    test) packages=(postgresql chromium bubblewrap)  # and Node.js for the hub's proxy (tests/hub)
        command -v node >/dev/null 2>&1 || packages+=(nodejs)
        command -v npm >/dev/null 2>&1 || packages+=(npm) ;;
    grade) packages=(bubblewrap) ;;
    hub) packages=(bubblewrap)  # and Node.js for the proxy, below
        command -v node >/dev/null 2>&1 || packages+=(nodejs)
        command -v npm >/dev/null 2>&1 || packages+=(npm) ;;
    *) echo "system_packages: '$what' is not a target; use book, test, grade or hub" >&2; exit 2 ;;
esac

PYTHON=${PYTHON:-python3}
missing=()
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    missing+=(python3-venv)  # Debian ships venv's pip bootstrap apart from python3
fi
for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = "installed" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    why=$([ "$(id -u)" -ne 0 ] && echo "not root" || echo "no apt-get here")
    echo "system_packages: missing Debian package(s) ${missing[*]} ($why); install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi

echo "system_packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

# Debian's postgresql package starts a cluster service where it can; the tests run
# their own server, so a service that did start is harmless and is left alone.
for pkg in "${missing[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [ "$status" != "installed" ]; then
        echo "system_packages: $pkg is still not installed after apt-get install" >&2
        exit 1
    fi
done
echo "system_packages: installed ${missing[*]}"
