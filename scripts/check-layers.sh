#!/bin/sh
# Fails when a file of the library calls a function (or uses a global) defined in a higher
# layer: layers call downwards only (docs/architecture.md). Reads the built objects, so a call
# is what the compiler emitted (macros and static inline helpers included), not a guess from
# the text. Usage: scripts/check-layers.sh [BUILD_DIR] (default: build, after a build).
#
# Within one layer, files may call each other. A folder not in the table is an error, so a new
# folder gets a layer before it gets code.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
objdir="$build/CMakeFiles/prometorch_objects.dir"
[ -d "$objdir/src" ] || {
    echo "check-layers: no objects under $objdir (build first: make build)" >&2
    exit 1
}
command -v nm >/dev/null 2>&1 || {
    echo "check-layers: nm (binutils) is not installed" >&2
    exit 1
}

# The layer order, lowest first: a folder (the longest matching prefix of a source's path
# wins) and its rank. Equal ranks are one layer.
layers='
src/core          1 core: tensor, storage, dtype, device, dispatch, errors, scopes, threads
src/backends      2 backends: kernels per device
src/graph         3 graph: autograd nodes, saved tensors, grad mode (what ops record)
src/ops           4 ops: public op front-ends and their backward formulas
src/autograd      5 autograd engine: backward, hooks, pt_autograd_grad, checkpoint
src/value         6 value tree: pt_value (used by io and nn)
src/data          7 data: datasets, loaders
src/io            7 io: checkpoints, safetensors, GGUF, pickle
src/nn            8 nn: modules, state dicts, module save/load
src/optim         9 optim: optimizers, schedulers
src/serve/llm    10 serve/llm: the LLM engine
src/serve/http   11 serve/http: the server
src/serve        10 serve: (files not yet split into llm/ and http/)
'

# Objects of sources that still exist (a moved file leaves its old object in a reused build).
objs=$(find "$objdir/src" -name '*.o' | sort | while read -r o; do
    src=${o#"$objdir"/}
    [ ! -f "${src%.o}" ] || echo "$o"
done)
[ -n "$objs" ] || {
    echo "check-layers: no objects under $objdir/src" >&2
    exit 1
}
# shellcheck disable=SC2086 # object paths are the build's own, without spaces
nm -A $objs 2>/dev/null | awk -v objdir="$objdir/" -v layers="$layers" '
function layer_of(path,    best, p) {
    best = ""
    for (p in rank)
        if (index(path, p "/") == 1 && length(p) > length(best))
            best = p
    return best
}
BEGIN {
    n = split(layers, lines, "\n")
    for (i = 1; i <= n; i++) {
        if (split(lines[i], f, " ") < 2)
            continue
        rank[f[1]] = f[2] + 0
    }
}
{
    # "OBJ:ADDR TYPE NAME" (defined) or "OBJ:         U NAME" (undefined)
    if (!match($0, /\.o:/))
        next
    obj = substr($0, 1, RSTART + 1)
    rest = substr($0, RSTART + 3)
    nf = split(rest, f, " ")
    if (nf < 2)
        next
    type = f[nf - 1]
    sym = f[nf]
    src = substr(obj, length(objdir) + 1)
    sub(/\.o$/, "", src)
    if (!(src in srclayer)) {
        srclayer[src] = layer_of(src)
        if (srclayer[src] == "") {
            printf "check-layers: %s is in no layer (add its folder to the table)\n", src
            bad = 1
        }
    }
    if (type == "U")
        uses[++nuses] = src SUBSEP sym
    else if (type ~ /^[TDBRVWCG]$/)
        defined[sym] = src
}
END {
    for (i = 1; i <= nuses; i++) {
        split(uses[i], u, SUBSEP)
        if (!(u[2] in defined))
            continue # libc, BLAS, CUDA ...
        from = srclayer[u[1]]
        to = srclayer[defined[u[2]]]
        if (from == "" || to == "" || rank[to] <= rank[from])
            continue
        printf "check-layers: %s (%s) calls %s of %s (%s, a higher layer)\n", u[1], from, u[2],
               defined[u[2]], to
        bad = 1
    }
    exit bad
}
' || {
    echo "check-layers: upward calls above (layers: scripts/check-layers.sh, docs/architecture.md)" >&2
    exit 1
}
echo "check-layers: $(echo "$objs" | wc -l) objects, no upward call"
