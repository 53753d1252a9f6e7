#!/usr/bin/env python3
"""LLM speed: PromeTorch (build/bin/llm_bench) against llama.cpp (llama-cpp-python), same run.

Exact command (as scripts/bench.sh runs it; docs/benchmarks.md has the results):

    PYTHON_WITH_LLAMA_CPP benchmarks/llm_vs_llamacpp.py --bin build/bin/llm_bench \
        --threads 2 --repeat 5 \
        data/models/SmolLM2-135M-Instruct.Q4_1.gguf data/models/gemma-3-270m-q4_k_m.gguf

For each model, both engines get the same 512 prompt token ids (llm_bench builds them from a
fixed English text and writes them to a file; llama.cpp evaluates that list), the same threads,
a 1024-token context and n_batch 512:
  pp512  prompt processing: one evaluation of the 512 ids from an empty cache (llama.cpp:
         llm.reset(); llm.eval(ids); ours: pt_llm_eval(ids, 512, n_past 0)), after a warm-up;
  tg128  generation: 128 evaluations of one token each after the prompt, each the argmax of
         the previous logits (greedy, no sampler on either side).
The two alternate (ours first on even rounds, llama.cpp first on odd ones) --repeat times and
the median of each is reported, with the ratio ours / llama.cpp. The generated ids of the two
are compared (greedy decoding of the same ids should agree; a late divergence between two
near-equal logits is possible).

Generation reads every weight once per token, so it is bounded by memory bandwidth: the weight
bytes read per token (all tensors but the token embedding table, plus the output matrix, which
is the embedding table when the model ties them; sizes from the gguf package) divided by the
read bandwidth of the same threads (each sums its slice of a 512 MB buffer, best of 7:
`llm_bench --membw`, "read_gbs") gives the highest possible tokens/s; each side's tg128 is shown
as a percentage of it. A model small enough to stay in the last-level cache can pass 100%.
--threads 1,2 runs the whole comparison once per thread count (one table each). Each cell is
the median of --repeat runs with the range (min–max) beside it.

llama.cpp's CPU threads wait for each other by spinning (OpenMP's default wait policy): on a
machine where other processes compete for the cores this collapses its speed (a descheduled
thread stalls the spinning ones). --omp-passive sets OMP_WAIT_POLICY=PASSIVE for it (before
llama_cpp is imported); the table header prints the load average and the policy used, and a
warning when the load exceeds the core count -- quote ratios from a quiet machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def weight_bytes_per_token(path):
    """Bytes of the weights one generated token reads: all tensors except token_embd, plus the
    output matrix (token_embd again when the output is tied to it)."""
    from gguf import GGUFReader

    sizes = {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}
    total = sum(n for name, n in sizes.items() if name != "token_embd.weight")
    if "output.weight" not in sizes:
        total += sizes.get("token_embd.weight", 0)
    return total


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"no JSON line from {' '.join(cmd)}:\n{out}")
    return json.loads(lines[-1])


def ours(args, model, ids_file, ctx):
    r = run_json([args.bin, model, "--threads", str(args.threads), "--ctx", str(ctx),
                  "--batch", "512", "--pp", str(args.pp), "--tg", str(args.tg),
                  "--ids-in", ids_file])
    return r["pp_tokens"] / r["pp_s"][0], r["tg_tokens"] / r["tg_s"][0], r["tg_ids"]


class LlamaCpp:
    def __init__(self, args, model, ids, ctx):
        import numpy as np
        from llama_cpp import Llama

        self.np = np
        self.llm = Llama(model_path=model, n_ctx=ctx, n_batch=512, n_ubatch=512,
                         n_threads=args.threads, n_threads_batch=args.threads,
                         logits_all=False, verbose=False)
        self.ids, self.tg, self.n_vocab = ids, args.tg, self.llm.n_vocab()
        self.llm.reset()
        self.llm.eval(ids)  # warm-up

    def run(self):
        llm, np = self.llm, self.np
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(self.ids)
        pp_s = time.perf_counter() - t0
        gen = []
        t0 = time.perf_counter()
        for _ in range(self.tg):
            # without logits_all, llama-cpp-python keeps no scores: read the last row directly
            row = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(self.n_vocab,))
            tok = int(np.argmax(row))
            gen.append(tok)
            llm.eval([tok])
        tg_s = time.perf_counter() - t0
        return len(self.ids) / pp_s, self.tg / tg_s, gen

    def close(self):
        self.llm.close() if hasattr(self.llm, "close") else None


def bench_model(args, model, bw):
    ctx = args.ctx
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = os.path.join(tmp, "ids.txt")
        subprocess.run([args.bin, model, "--pp", str(args.pp), "--ctx", str(ctx), "--ids-out",
                        ids_file, "--ids-only"], check=True)
        ids = [int(x) for x in open(ids_file).read().split()]
        cpp = LlamaCpp(args, model, ids, ctx)
        res = {"ours": [], "cpp": []}
        for r in range(args.repeat):
            order = ["ours", "cpp"] if r % 2 == 0 else ["cpp", "ours"]
            for who in order:
                res[who].append(ours(args, model, ids_file, ctx) if who == "ours" else cpp.run())
        cpp.close()
    row = {"model": os.path.basename(model), "threads": args.threads}
    for who in ("ours", "cpp"):
        for k, key in ((0, "_pp"), (1, "_tg")):
            v = [x[k] for x in res[who]]
            row[who + key] = statistics.median(v)
            row[who + key + "_range"] = (min(v), max(v))
    a, b = res["ours"][-1][2], res["cpp"][-1][2]
    row["agree"] = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    row["bytes"] = weight_bytes_per_token(model)
    row["bound"] = bw * 1e9 / row["bytes"]
    return row


def fmt_range(r, key):
    lo, hi = r[key + "_range"]
    return f"{r[key]:.1f} ({lo:.1f}–{hi:.1f})"


def print_table(args, rows, bwj, load):
    pp, tg = f"pp{args.pp}", f"tg{args.tg}"
    cores = os.cpu_count() or 1
    print(f"\nLLM speed, {args.threads} thread(s), median (min–max) of {args.repeat} alternating "
          f"runs, tokens/s. Bandwidth bound = streaming read of 512 MB on {args.threads} "
          f"thread(s), {bwj['read_gbs']:.2f} GB/s (memcpy: {bwj['copy_gbs']:.2f} GB/s copied), "
          f"÷ weight bytes per token. Load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end, on {cores} cores; llama.cpp OMP_WAIT_POLICY "
          f"{os.environ.get('OMP_WAIT_POLICY', 'default')}\n")
    print(f"| model | threads | {pp} ours | {pp} llama.cpp | {pp} ratio | {tg} ours | "
          f"{tg} llama.cpp | {tg} ratio | weights/token MB | bound tok/s | ours % bound | "
          f"llama.cpp % bound | greedy ids agree |")
    print("|" + "---|" * 13)
    for r in rows:
        print(f"| {r['model']} | {r['threads']} | {fmt_range(r, 'ours_pp')} | "
              f"{fmt_range(r, 'cpp_pp')} | {r['ours_pp'] / r['cpp_pp']:.2f} | "
              f"{fmt_range(r, 'ours_tg')} | {fmt_range(r, 'cpp_tg')} | "
              f"{r['ours_tg'] / r['cpp_tg']:.2f} | {r['bytes'] / 1e6:.1f} | {r['bound']:.1f} | "
              f"{100 * r['ours_tg'] / r['bound']:.0f}% | {100 * r['cpp_tg'] / r['bound']:.0f}% | "
              f"{r['agree']}/{args.tg} |", flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="GGUF files")
    ap.add_argument("--bin", default=os.path.join(here, "..", "build", "bin", "llm_bench"))
    ap.add_argument("--threads", default="2",
                    help="thread count, or a comma-separated list (each is a table)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--omp-passive", action="store_true",
                    help="OMP_WAIT_POLICY=PASSIVE for llama.cpp (a loaded machine)")
    args = ap.parse_args()
    if args.omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read when llama_cpp loads libgomp
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    if load > cores:
        print(f"warning: load average {load:.1f} on {cores} cores: other processes compete for "
              f"the CPUs, and llama.cpp's spinning threads suffer most (see --omp-passive)",
              file=sys.stderr)
    if args.pp + args.tg > args.ctx:
        sys.exit("--ctx must hold --pp + --tg tokens")

    out = []
    for threads in [int(t) for t in args.threads.split(",")]:
        args.threads = threads
        bwj = run_json([args.bin, "--membw", "--threads", str(threads), "--mb", "512"])
        rows = []
        for m in args.models:
            rows.append(bench_model(args, m, bwj["read_gbs"]))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        print_table(args, rows, bwj, load)
        out.append({"threads": threads, "membw": bwj, "rows": rows})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
