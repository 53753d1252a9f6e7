#!/usr/bin/env python3
"""Checkpoint loading benchmark: PromeTorch's pt_load against torch.load, in one run.

Creates test checkpoints in a temporary folder with torch -- big.pt, a ~400 MB float32 state
dict of 88 tensors shaped like a 7-layer transformer (d_model 1024, vocabulary 12,288);
small.pt, 20,000 float32 tensors of 16-496 elements (~20 MB); and big.safetensors, the same
tensors as big.pt, when the safetensors package is importable -- then, per file and case,
alternates build/bin/load_vs_torch (the C half, a fresh process per measurement: one untimed
load, then --repeat timed loads) and the peer (one long-lived worker process per Python interpreter, the same
number of loads per measurement). Each file is read once before it is measured, so both sides
load from a warm page cache: the times are parsing + copying/mapping, not disk.

Peers: torch.load(path, weights_only=True) (copies every storage into memory); with torch 2.x
also torch.load(path, mmap=True, weights_only=True); safetensors.torch.load_file for
.safetensors. Ours: pt_load (storages mapped copy-on-write, zero-copy), pt_load_ex with
.copy = true for the "copy" rows, pt_load_safetensors. "+ touch" also sums every tensor
(t.sum() per tensor in PyTorch, pt_sum in PromeTorch), so mapped pages are really read;
every time includes freeing the loaded tree. Threads: torch.set_num_threads(T) and
PT_NUM_THREADS=T. The table gives medians over all loads (ours/peer below 1 = ours faster).

    /usr/bin/python3 benchmarks/load_vs_torch.py --bin build/bin/load_vs_torch --threads 2 \
        [--python2 PYTHON_WITH_TORCH2] [--rounds 2] [--repeat 2] [--markdown]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# ---- worker: runs under each peer interpreter, answers one JSON request per stdin line ------


def worker_make(req):
    import torch
    torch.manual_seed(0)
    d, layers, vocab = 1024, 7, 12288
    big = {"wte.weight": torch.randn(vocab, d), "wpe.weight": torch.randn(1024, d)}
    for i in range(layers):
        p = f"h.{i}."
        big[p + "ln_1.weight"] = torch.ones(d)
        big[p + "ln_1.bias"] = torch.zeros(d)
        big[p + "attn.c_attn.weight"] = torch.randn(3 * d, d)
        big[p + "attn.c_attn.bias"] = torch.randn(3 * d)
        big[p + "attn.c_proj.weight"] = torch.randn(d, d)
        big[p + "attn.c_proj.bias"] = torch.randn(d)
        big[p + "ln_2.weight"] = torch.ones(d)
        big[p + "ln_2.bias"] = torch.zeros(d)
        big[p + "mlp.c_fc.weight"] = torch.randn(4 * d, d)
        big[p + "mlp.c_fc.bias"] = torch.randn(4 * d)
        big[p + "mlp.c_proj.weight"] = torch.randn(d, 4 * d)
        big[p + "mlp.c_proj.bias"] = torch.randn(d)
    big["ln_f.weight"] = torch.ones(d)
    big["ln_f.bias"] = torch.zeros(d)
    torch.save(big, os.path.join(req["dir"], "big.pt"))
    g = torch.Generator().manual_seed(1)
    sizes = torch.randint(16, 497, (req["small_count"],), generator=g).tolist()
    small = {}
    for i, n in enumerate(sizes):
        shape = (n,) if i % 3 == 0 else ((n // 8, 8) if n % 8 == 0 else (1, n))
        small[f"blocks.{i // 10}.p{i % 10}"] = torch.randn(shape, generator=g)
    torch.save(small, os.path.join(req["dir"], "small.pt"))
    return {"big_tensors": len(big), "small_tensors": len(small)}


def worker_make_st(req):
    import torch
    import safetensors.torch
    sd = torch.load(req["src"], weights_only=True)
    safetensors.torch.save_file(sd, req["dst"])
    return {}


def worker_time(req):
    import torch
    path, how, touch, repeat = req["file"], req["how"], req["touch"], req["repeat"]
    if how == "st":
        import safetensors.torch
        load = safetensors.torch.load_file
    elif how == "mmap":
        def load(p):
            return torch.load(p, mmap=True, weights_only=True)
    else:
        def load(p):
            return torch.load(p, weights_only=True)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sd = load(path)
        if touch:
            for t in sd.values():
                t.sum()
        del sd
        times.append(1e3 * (time.perf_counter() - t0))
    return {"times_ms": times}


def worker_main(threads):
    import torch
    torch.set_num_threads(threads)
    try:
        import safetensors
        st_version = safetensors.__version__
    except ImportError:
        st_version = None
    version = tuple(int(x) for x in torch.__version__.split(".")[:2])
    info = {"torch": torch.__version__, "safetensors": st_version,
            "mmap": version >= (2, 1), "threads": torch.get_num_threads()}
    handlers = {"make": worker_make, "make_st": worker_make_st, "time": worker_time}
    for line in sys.stdin:
        req = json.loads(line)
        out = info if req["cmd"] == "info" else handlers[req["cmd"]](req)
        print(json.dumps(out), flush=True)


# ---- driver ----------------------------------------------------------------------------------


class Peer:
    def __init__(self, python, threads):
        self.python = python
        self.proc = subprocess.Popen(
            [python, os.path.abspath(__file__), "--worker", "--threads", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
        self.info = self.ask({"cmd": "info"})

    def ask(self, req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"peer worker {self.python} died on {req}")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def ours_times(binary, path, touch, copy, repeat, threads):
    cmd = [binary, path, "--repeat", str(repeat), "--warmup", "1"] + (["--touch"] if touch else []) + \
        (["--copy"] if copy else [])
    env = dict(os.environ, PT_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def cases_for(peer, files):
    """(file key, ours copy?, peer how, touch) for every row measured against this peer."""
    cases = []
    for touch in (False, True):
        cases.append(("big.pt", False, "load", touch))
    cases.append(("big.pt", True, "load", False))
    if peer.info["mmap"]:
        for touch in (False, True):
            cases.append(("big.pt", False, "mmap", touch))
    for touch in (False, True):
        cases.append(("small.pt", False, "load", touch))
    if peer.info["mmap"]:
        for touch in (False, True):
            cases.append(("small.pt", False, "mmap", touch))
    if peer.info["safetensors"] and "big.safetensors" in files:
        for touch in (False, True):
            cases.append(("big.safetensors", False, "st", touch))
    return cases


def describe(key, copy, how, touch, peer):
    ours = {"big.safetensors": "pt_load_safetensors"}.get(key, "pt_load_ex(copy)" if copy
                                                           else "pt_load")
    theirs = {"load": "torch.load", "mmap": "torch.load(mmap=True)",
              "st": "safetensors load_file"}[how]
    return (f"{key}{' + touch' if touch else ''}", ours, f"{theirs} ({peer.info['torch']})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bin", default="build/bin/load_vs_torch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--python", default=sys.executable, help="first peer interpreter")
    ap.add_argument("--python2", default=None, help="second peer interpreter (e.g. torch 2.x)")
    ap.add_argument("--rounds", type=int, default=2, help="alternations ours/peer per case")
    ap.add_argument("--repeat", type=int, default=2, help="loads per measurement")
    ap.add_argument("--small-count", type=int, default=20000)
    ap.add_argument("--tmpdir", default=None)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker_main(args.threads)
        return
    start = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="load_vs_torch.", dir=args.tmpdir)
    peers = []
    try:
        peers = [Peer(p, args.threads) for p in [args.python] + ([args.python2] if args.python2
                                                                 else [])]
        made = peers[0].ask({"cmd": "make", "dir": tmp, "small_count": args.small_count})
        files = {k: os.path.join(tmp, k) for k in ("big.pt", "small.pt")}
        st_peer = next((p for p in peers if p.info["safetensors"]), None)
        if st_peer:
            files["big.safetensors"] = os.path.join(tmp, "big.safetensors")
            st_peer.ask({"cmd": "make_st", "src": files["big.pt"],
                         "dst": files["big.safetensors"]})
        sizes = {k: os.path.getsize(f) / 1e6 for k, f in files.items()}
        print(f"# {platform.machine()}, {args.threads} threads, warm page cache; "
              f"big.pt {sizes['big.pt']:.0f} MB / {made['big_tensors']} tensors, small.pt "
              f"{sizes['small.pt']:.1f} MB / {made['small_tensors']} tensors; peers: "
              + ", ".join(f"{p.python} (torch {p.info['torch']}, safetensors "
                          f"{p.info['safetensors']})" for p in peers), flush=True)
        for f in files.values():
            warm(f)
        rows = []
        for peer in peers:
            for key, copy, how, touch in cases_for(peer, files):
                ours, theirs = [], []
                for r in range(args.rounds):
                    def run_ours():
                        res = ours_times(args.bin, files[key], touch, copy, args.repeat,
                                         args.threads)
                        ours.extend(res["times_ms"])

                    def run_peer():
                        res = peer.ask({"cmd": "time", "file": files[key], "how": how,
                                        "touch": touch, "repeat": args.repeat})
                        theirs.extend(res["times_ms"])
                    # Alternate who goes first, so neither always follows the other's frees.
                    for fn in ((run_ours, run_peer) if r % 2 == 0 else (run_peer, run_ours)):
                        fn()
                t_ours, t_peer = statistics.median(ours), statistics.median(theirs)
                row = describe(key, copy, how, touch, peer) + (t_ours, t_peer, t_ours / t_peer)
                rows.append(row)
                # Progress goes to stderr in markdown mode, so stdout is only the table.
                print(f"{row[0]:24s} {row[1]:20s} {row[3]:9.2f} ms   {row[2]:40s} "
                      f"{row[4]:9.2f} ms   ours/peer {row[5]:.3f}", flush=True,
                      file=sys.stderr if args.markdown else sys.stdout)
        if args.markdown:
            print("| case | ours | peer | ours ms | peer ms | ours/peer |")
            print("|---|---|---|---:|---:|---:|")
            for r in rows:
                print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.3f} |")
        print(f"# total {time.perf_counter() - start:.0f} s")
    finally:
        for p in peers:
            p.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
