#!/bin/sh
# ctest torch_load_check: write_checkpoints writes PromeTorch checkpoints into a temporary folder
# and check_torch_load.py loads them in PyTorch, with each interpreter that can import torch:
# /usr/bin/python3 (Debian's torch 1.13) and any listed in $PT_TORCH_PYTHONS (e.g. a venv with
# torch 2.x). Exit 77 (skipped) when none can.
#   run_torch_load_check.sh WRITE_CHECKPOINTS CHECK_SCRIPT
writer=$1
check=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
"$writer" "$dir" >/dev/null || exit 1
ran=0
rc=0
for py in /usr/bin/python3 $PT_TORCH_PYTHONS; do
    "$py" -c 'import torch' 2>/dev/null || continue
    ran=1
    "$py" "$check" "$dir" || rc=1
done
[ "$ran" = 1 ] || { echo "torch is not importable: skipped"; exit 77; }
exit $rc
