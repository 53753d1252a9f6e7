#!/bin/sh
# Fails when a tracked C or CUDA file is not formatted as the root .clang-format says (the
# files were all reformatted once; keep them so). Fix with: clang-format -i FILE.
# clang-format comes from Debian (scripts/setup.sh installs it).
set -eu
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null 2>&1 || {
    echo "check-format: clang-format is not installed (scripts/setup.sh installs it)" >&2
    exit 1
}
files=$(git ls-files '*.c' '*.h' '*.cu')
# shellcheck disable=SC2086 # the names are the project's own, without spaces
if ! clang-format --dry-run -Werror $files; then
    echo "check-format: the files above are not clang-format clean (clang-format -i FILE)" >&2
    exit 1
fi
echo "check-format: $(echo "$files" | wc -l) files clean"
