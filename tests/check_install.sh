#!/bin/sh
# Installs the built library into a temporary prefix, then compiles and runs the README's
# example program twice: with `cc prog.c $(pkg-config --cflags --libs prometorch)` and
# through `find_package(PromeTorch)` in a tiny CMake project.
set -eu
src_dir="$1"; build_dir="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
# the example is the C block between the markers in README.md
sed -n '/<!-- example:start -->/,/<!-- example:end -->/p' "$src_dir/README.md" | sed '1,2d;$d' | sed '$d' > "$tmp/prog.c"
[ -s "$tmp/prog.c" ] || { echo "README example not found"; exit 1; }
libdir=$(ls -d "$tmp/prefix"/lib*/pkgconfig | head -n 1)
export PKG_CONFIG_PATH="$libdir"
cc -Wall -Wextra -Werror "$tmp/prog.c" $(pkg-config --cflags --libs prometorch) -o "$tmp/prog"
LD_LIBRARY_PATH="$(dirname "$libdir")" "$tmp/prog" > "$tmp/out.txt"
grep -q "cannot be multiplied" "$tmp/out.txt" || { echo "pkg-config build: unexpected output"; cat "$tmp/out.txt"; exit 1; }
mkdir "$tmp/cm"
cp "$tmp/prog.c" "$tmp/cm/prog.c"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(readme_example C)
find_package(PromeTorch REQUIRED)
add_executable(prog prog.c)
target_link_libraries(prog PRIVATE PromeTorch::prometorch)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
LD_LIBRARY_PATH="$(dirname "$libdir")" "$tmp/cm/build/prog" | grep -q "cannot be multiplied"
echo "2 passed, 0 failed"
