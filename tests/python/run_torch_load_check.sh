#!/bin/sh
# ctest torch_load_check: write_checkpoints writes PromeTorch checkpoints into a temporary folder
# and check_torch_load.py loads them in PyTorch, with each interpreter that can import torch:
# /usr/bin/python3 (Debian's torch 1.13: python3-torch, which scripts/setup.sh installs) and any
# listed in $PT_TORCH_PYTHONS (e.g. a venv with torch 2.x). Fails when /usr/bin/python3 cannot
# import torch: the set-up installs it, so its absence is a broken set-up, not a reason to skip.
#   run_torch_load_check.sh WRITE_CHECKPOINTS CHECK_SCRIPT
writer=$1
check=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
"$writer" "$dir" >/dev/null || exit 1
PT_SAVE_ZIP64_LIMIT=0 "$writer" "$dir" >/dev/null || exit 1 # zip64.pt (pt_save reads it once)
rc=0
/usr/bin/python3 -c 'import torch' || {
    echo "FAIL: /usr/bin/python3 cannot import torch (install python3-torch: scripts/setup.sh)"
    exit 1
}
for py in /usr/bin/python3 $PT_TORCH_PYTHONS; do
    "$py" -c 'import torch' 2>/dev/null || continue
    "$py" "$check" "$dir" || rc=1
done
exit $rc
