#!/usr/bin/env bash
# Installs the Debian packages IRON builds with, where any is missing (clang and its runtime
# libraries build the libFuzzer targets, scripts/fuzz.sh; glslc and libvulkan-dev build the
# Vulkan device, and mesa-vulkan-drivers gives its tests lavapipe, a Vulkan device on the CPU;
# python3-venv and python3-dev make the Python environment and build the Python extension;
# libcpp-httplib-dev is `iron serve`'s HTTP server, curl one of its tests' clients; libhwy-dev is
# Google Highway, whose headers the CPU kernels written once for every target use).
#   scripts/install-deps.sh [PACKAGE...]   those packages instead (scripts/test-arm64.sh's); a
#                                          name ending in :arm64 adds that architecture first
set -euo pipefail
packages=(cmake ninja-build g++ libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libedit-dev libcpp-httplib-dev libhwy-dev curl tmux
  python3 python3-pip python3-venv python3-dev unzip clang libclang-rt-14-dev glslc libvulkan-dev mesa-vulkan-drivers)
if [ $# -gt 0 ]; then packages=("$@"); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  for p in "${missing[@]}"; do
    if [[ $p == *:arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
      $sudo_cmd dpkg --add-architecture arm64
    fi
  done
  $sudo_cmd apt-get update -qq
  # A multiarch library must be the same version as the host's copy of it, so apt may upgrade a
  # host package; it must never remove one.
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-remove "${missing[@]}"
fi
