#!/usr/bin/env bash
# Second, independent reader: the Python (stdlib + numpy) implementation must
# decode every committed test vector to exactly the JSON `gwrecord dump` prints.
# Run from the repository root; bounded by `timeout`.
set -euo pipefail
here="crates/wire"
py=""
for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' >/dev/null 2>&1; then
        py="$cand"
        break
    fi
done
if [ -z "$py" ]; then
    echo "wire extra.sh: no python3 with numpy (install python3-numpy)" >&2
    exit 1
fi
timeout 120 "$py" "$here/python/gwrecord.py" check "$here/testdata"
