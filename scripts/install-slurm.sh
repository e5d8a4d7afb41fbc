#!/usr/bin/env bash
# Installs what the Slurm test needs (tests/multinode/slurm_test.py, which
# runs this when they are missing): Debian's Slurm controller, node daemon and
# client, and munge for their authentication.  Safe to run again.  The
# packages' own services are not used: the test starts its own munged,
# slurmctld and slurmd with private configuration, and stops them.
set -euo pipefail
exec "$(dirname "$0")/install-deps.sh" slurmctld slurmd slurm-client munge
