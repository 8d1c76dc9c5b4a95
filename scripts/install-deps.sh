#!/usr/bin/env bash
# Installs what building and testing gridwire needs on Debian 12, and nothing
# when it is already there (so repeated `make` runs stay fast and offline).
#   - Rust (cargo) must already be installed (rustup or Debian's cargo >= 1.80).
#   - Debian packages: a C compiler and make (C floors, examples), gfortran (the
#     Fortran bindings), cmake and pkg-config (the install tests check
#     find_package(MPI) and the .pc files), MPICH (the
#     runtime is tested starting under Hydra's mpiexec; peers for benchmarks),
#     Open MPI (benchmark peer), numpy (the second, independent record reader),
#     iproute2 and nftables (network namespaces), openssh-server/-client and
#     iputils-ping (gw-testbed: every testbed host runs its own sshd), slurm-wlm
#     and munge (the testbed runs Slurm to test `srun --mpi=pmi2`; the test
#     starts its own daemons, not the packages' services), pvm, pvm-dev and
#     pvm-examples (Debian's PVM 3.4.6: the reference the PVM face is tested
#     and benchmarked against).
set -euo pipefail
pkgs=(gcc gfortran make cmake pkg-config mpich libmpich-dev openmpi-bin libopenmpi-dev python3 python3-numpy python3-matplotlib python3-dev python3-venv iproute2 nftables procps openssh-server openssh-client iputils-ping slurm-wlm munge pvm pvm-dev pvm-examples)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# numpy may come from pip instead of Debian; accept either.
if printf '%s\n' "${missing[@]}" | grep -qx python3-numpy && python3 -c 'import numpy' 2>/dev/null; then
  missing=("${missing[@]/python3-numpy}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: cargo not found; install Rust (rustup, or 'apt-get install cargo' on a recent Debian)" >&2
  exit 1
fi
