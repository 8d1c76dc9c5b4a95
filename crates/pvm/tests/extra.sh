#!/usr/bin/env bash
# The PVM face: Debian's pvm-examples and our own PVM programs compiled
# unchanged against gridwire's pvm3.h and compared with Debian's PVM 3.4.6.
set -u
exec timeout 300 bash "$(dirname "$0")/examples.sh" "$@"
