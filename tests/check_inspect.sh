#!/bin/sh
# Checks pt-inspect's output (run by ctest; see tools/CMakeLists.txt).
#   check_inspect.sh PT_INSPECT FILE EXPECTED [OPTION]   every line of EXPECTED (written by the
#       fixture generator) occurs in the text output (of `pt-inspect FILE OPTION`), and the --json
#       document's totals match the expected "total:" line, if there is one (and python3)
#   check_inspect.sh --escape PT_INSPECT   control characters in names are printed escaped
#   check_inspect.sh --errors PT_INSPECT FIXTURES_DIR   broken and unknown files exit 1 with a
#       message on stderr naming the file
# Prints the usual "N passed, M failed" line.
set -u
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

if [ "$1" = "--errors" ]; then
    tool=$2
    fx=$3
    # a safetensors file cut in its data section; a GGUF file with version 1; a text file
    head -c 300 "$fx/safetensors/dtypes.safetensors" > "$tmp/cut.safetensors"
    printf 'GGUF\001\000\000\000' > "$tmp/v1.gguf"
    for case in "cut.safetensors:safetensors:" "v1.gguf:gguf: version 1" \
                "nothing:cannot open" "$(basename "$fx")/manifest:not a .pt"; do
        file=${case%%:*}
        want=${case#*:}
        path="$tmp/$file"
        [ "$file" = nothing ] && path="$tmp/nothing.pt"
        case "$file" in */manifest) path="$fx/safetensors/manifest.txt" ;; esac
        if "$tool" "$path" > "$tmp/out" 2> "$tmp/err"; then
            echo "accepted: $path"; fail=1
        elif ! grep -qF -- "$want" "$tmp/err" || ! grep -qF -- "$path" "$tmp/err"; then
            echo "bad message for $path:"; cat "$tmp/err"; fail=1
        fi
    done
    if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
    exit $fail
fi

if [ "$1" = "--escape" ]; then
    # a safetensors tensor named "a<ESC>[2Jb<LF>forged: line": the text output shows the name
    # escaped (no ESC byte, no line of its own for "forged"), the --json document still parses
    tool=$2
    hdr='{"a\u001b[2Jb\nforged: line":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    len=$(printf '%s' "$hdr" | wc -c)
    { printf "\\$(printf %03o "$len")\000\000\000\000\000\000\000"; printf '%s' "$hdr"
      printf '\000\000\000\000'; } > "$tmp/esc.safetensors"
    "$tool" "$tmp/esc.safetensors" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail=1; }
    esc=$(printf '\033')
    if grep -q "$esc" "$tmp/out"; then echo "raw ESC in the output"; fail=1; fi
    if grep -q '^forged' "$tmp/out"; then echo "a name forged a line"; fail=1; fi
    grep -qF 'a\x1b[2Jb\x0aforged: line' "$tmp/out" || { echo "name not escaped:"; cat "$tmp/out"; fail=1; }
    if command -v python3 > /dev/null; then
        "$tool" "$tmp/esc.safetensors" --json | python3 -c 'import json,sys; json.load(sys.stdin)' ||
            { echo "--json is not valid JSON"; fail=1; }
    fi
    if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
    exit $fail
fi

tool=$1
file=$2
expected=$3
option=${4:-}
if ! "$tool" "$file" $option > "$tmp/out" 2> "$tmp/err"; then
    cat "$tmp/err"
    grep -q "not built into this library" "$tmp/err" && exit 77 # .pt reading not there yet
    echo "0 passed, 1 failed"
    exit 1
fi
while IFS= read -r line; do
    if ! grep -qF -- "$line" "$tmp/out"; then
        echo "missing line: $line"
        fail=1
    fi
done < "$expected"
if [ $fail != 0 ]; then
    echo "--- output:"; cat "$tmp/out"
fi
"$tool" "$file" --json > "$tmp/json" || fail=1
if grep -q '^total:' "$expected" && command -v python3 > /dev/null 2>&1; then
    python3 - "$tmp/json" "$expected" <<'PY' || fail=1
import json, re, sys
doc = json.load(open(sys.argv[1]))
total = [l for l in open(sys.argv[2]) if l.startswith("total:")][0]
want = [int(x) for x in re.findall(r"(\d+) \w+", total)]
got = [doc["totals"][k] for k in ("tensors", "parameters", "bytes")]
if want != got:
    sys.exit(f"json totals {got} != expected {want}")
PY
fi
if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
