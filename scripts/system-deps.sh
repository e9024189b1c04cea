#!/usr/bin/env bash
# System packages flatline's build and tests need on a fresh Debian/Ubuntu machine.
# None yet: the runtime and the CLI build from crates.io alone. When the dashboard
# lands, its headless screenshot tests will add xvfb here.
set -euo pipefail
packages=()
if [ ${#packages[@]} -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
fi
