#!/bin/sh
# Fails when an object of libprometorch.so holds code no exported (pt_) function can reach:
# links the library's objects again with --gc-sections, whose roots are the exported symbols,
# and lists the objects whose code the linker threw away whole. Such a file is dead weight in
# the .so (or a part of the API someone forgot to export). Usage:
# scripts/check-reachable.sh [BUILD_DIR] (default: build, after a build).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
objdir="$build/CMakeFiles/prometorch_objects.dir"
[ -d "$objdir/src" ] || {
    echo "check-reachable: no objects under $objdir (build first: make build)" >&2
    exit 1
}
cc=${CC:-cc}

# The objects linked into the library: ninja knows them exactly (a build folder keeps objects
# of files that were moved or configured out); otherwise those of the tracked sources.
if [ -f "$build/build.ninja" ] && command -v ninja >/dev/null 2>&1; then
    objs=$(ninja -C "$build" -t inputs prometorch | sed -n "s|^\(CMakeFiles/prometorch_objects\.dir/.*\.o\)\$|$build/\1|p")
else
    objs=$(git ls-files 'src/*.c' 'src/*.cu' | while read -r f; do
        [ -f "$objdir/$f.o" ] && printf '%s\n' "$objdir/$f.o"
    done)
fi
[ -n "$objs" ] || {
    echo "check-reachable: no objects of tracked sources under $objdir" >&2
    exit 1
}

out=$(mktemp)
trap 'rm -f "$out" "$out.so"' EXIT
# shellcheck disable=SC2086 # one word per object
"$cc" -shared -o "$out.so" $objs -Wl,--gc-sections -Wl,--print-gc-sections \
    -Wl,--unresolved-symbols=ignore-all 2>"$out" || {
    cat "$out" >&2
    exit 1
}
dead=$(sed -n "s/.*removing unused section '\.text' in file '\([^']*\)'.*/\1/p" "$out" |
    sed "s|^$objdir/||; s|\.o\$||" | sort -u)
if [ -n "$dead" ]; then
    echo "check-reachable: no exported function reaches the code of:" >&2
    printf '  %s\n' $dead >&2
    exit 1
fi
echo "check-reachable: $(printf '%s\n' "$objs" | wc -l) objects, each reached from an export"
