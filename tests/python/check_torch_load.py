#!/usr/bin/env python3
"""Checks checkpoints written by PromeTorch against real PyTorch (ctest torch_load_check).

    /usr/bin/python3 tests/python/check_torch_load.py DIR

DIR holds the files tests/python/write_checkpoints.c writes. Part 1 (pt_save's files): every
expected value is computed here from the same formulas (never read back from PromeTorch). Each
file is loaded with torch.load(weights_only=True) where the installed torch's safe unpickler
supports its contents (torch 1.13 lacks BINFLOAT and _codecs.encode: floats.pt and bytes.pt are
then loaded with weights_only=False) and also with weights_only=False.
Part 2 (pt_nn_save, optimizer/scheduler state, views, dtypes, safetensors): the C program
described its own inputs in DIR/expected.manifest (tree, key order, scalars, dtypes, shapes,
strides, offsets, storage sharing) and DIR/expected.ptfx (tensor bytes); what torch.load (and
safetensors.torch.load_file, when importable) returns must match them bit for bit, and the
state dicts must load into the equivalent torch module / optimizer / scheduler.
Exit status 0 = all passed.
"""
import math
import os
import pickle
import struct
import sys
import zipfile
from collections import OrderedDict

import torch
import torch.nn as nn

D = sys.argv[1]
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
failures = []
passed = 0


def check(cond, what):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(what)
        print("FAIL:", what)


def load(name, safe=True):
    path = os.path.join(D, name)
    a = torch.load(path, weights_only=False)
    if safe:
        b = torch.load(path, weights_only=True)
        return a, b
    return a, None


def same_tensor(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and torch.equal(a, b))


def check_zip(name):
    """The zip layout torch.save produces: stored records under '<base name>/', each record's
    data at a multiple of 64, and zipfile's own CRC check."""
    path = os.path.join(D, name)
    base = os.path.splitext(name)[0]
    with zipfile.ZipFile(path) as z:
        check(z.testzip() is None, f"{name}: CRCs")
        infos = z.infolist()
        names = [i.filename for i in infos]
        check(names[0] == f"{base}/data.pkl" and names[-1] == f"{base}/version",
              f"{name}: record names {names[:3]} ... {names[-1:]}")
        check(z.read(f"{base}/version") == b"3\n", f"{name}: version")
        check(z.read(f"{base}/byteorder") == b"little", f"{name}: byteorder")
        check(all(i.compress_type == zipfile.ZIP_STORED for i in infos), f"{name}: stored")
        with open(path, "rb") as f:
            raw = f.read()
        for i in infos:
            n, x = int.from_bytes(raw[i.header_offset + 26:i.header_offset + 28], "little"), \
                int.from_bytes(raw[i.header_offset + 28:i.header_offset + 30], "little")
            start = i.header_offset + 30 + n + x
            if start % 64 != 0:
                check(False, f"{name}: {i.filename} data at {start}, not 64-aligned")
                break
        else:
            check(True, "aligned")
        check(raw[infos[0].header_offset + 30 + len(names[0]) +
                  int.from_bytes(raw[28:30], "little"):][:2] == b"\x80\x02", f"{name}: PROTO 2")


def pattern(t, j):
    return (torch.arange(t.numel(), dtype=torch.float64) * 0.5 + j).to(t.dtype).reshape(t.shape)


def check_state_dict(name):
    ref = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).state_dict()
    for sd in load(name):
        check(isinstance(sd, OrderedDict), f"{name}: an OrderedDict ({type(sd)})")
        check(list(sd.keys()) == list(ref.keys()), f"{name}: keys {list(sd.keys())}")
        for j, (k, v) in enumerate(sd.items()):
            check(v.dtype == ref[k].dtype and v.shape == ref[k].shape,
                  f"{name}: {k} {v.dtype} {tuple(v.shape)}")
            check(torch.equal(v, pattern(v, j)), f"{name}: {k} values")
        m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
        r = m.load_state_dict(sd, strict=True)
        check(not r.missing_keys and not r.unexpected_keys, f"{name}: load_state_dict")
        check(int(m[1].num_batches_tracked) == 6, f"{name}: num_batches_tracked")


def check_same_pickle(name):
    """torch.save of the loaded state dict (as a plain OrderedDict: no _metadata attribute,
    which PromeTorch does not write) pickles to exactly the same data.pkl bytes."""
    import tempfile
    sd = torch.load(os.path.join(D, name), weights_only=True)
    base = os.path.splitext(name)[0]
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, name)
        torch.save(OrderedDict(sd.items()), ref)
        with zipfile.ZipFile(ref) as z:
            want = z.read(f"{base}/data.pkl")
    with zipfile.ZipFile(os.path.join(D, name)) as z:
        got = z.read(f"{base}/data.pkl")
    check(got == want, f"{name}: data.pkl differs from torch.save's ({len(got)} vs {len(want)})")


def check_values():
    for v in load("values.pt"):
        check(v["none"] is None and v["true"] is True and v["false"] is False, "None/bools")
        ints = [0, 255, 256, 65535, 65536, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**63 - 1,
                -2**63, 2**40]
        check(v["ints"] == ints, f"ints {v['ints']}")
        check(v["str"] == "h\u00e9llo \u2713" and v["empty_str"] == "", "str")
        check(v["tuples"] == [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4, 5)], f"{v['tuples']}")
        check(v["nested"] == {1: "one", (2, "x"): [None, {"k": "v"}]}, f"{v['nested']}")
        check(type(v["nested"]) is dict, "a general dict stays a dict")
        check(v["same_list_a"] == [7, 8] and v["same_list_a"] is v["same_list_b"],
              "a shared list stays shared")
        check(v["big_list"] == list(range(2500)), "2500-item list")
        check(v["many_keys"] == {f"k{i}": -i for i in range(1500)}, "1500-key dict")
        check(v["strs"] == [f"s{i}" for i in range(300)] * 2, "300 strings twice")
        f32 = torch.tensor([[0, 0.25, 0.5], [0.75, 1, 1.25]])
        check(same_tensor(v["f32"], f32) and v["f32"] is v["f32_again"], "f32, shared tensor")
        check(same_tensor(v["f64"], torch.tensor([1.5, -2.25], dtype=torch.float64)), "f64")
        check(same_tensor(v["f16"], torch.tensor([0.5, 1, -2, 65504], dtype=torch.float16)),
              "f16")
        check(same_tensor(v["bf16"], torch.tensor([0.5, 1, -2, 3.140625],
                                                  dtype=torch.bfloat16)), "bf16")
        check(same_tensor(v["bool"], torch.tensor([True, False, True])), "bool")
        check(same_tensor(v["u8"], torch.tensor([0, 1, 255], dtype=torch.uint8)), "u8")
        check(same_tensor(v["i8"], torch.tensor([-128, 127], dtype=torch.int8)), "i8")
        check(same_tensor(v["i16"], torch.tensor([-32768, 32767], dtype=torch.int16)), "i16")
        check(same_tensor(v["i32"], torch.tensor([-2**31, 2**31 - 1], dtype=torch.int32)),
              "i32")
        check(same_tensor(v["i64"], torch.tensor([-2**63, 2**63 - 1], dtype=torch.int64)),
              "i64")
        check(v["empty"].shape == (0, 3) and v["empty"].dtype == torch.float32, "empty")
        check(same_tensor(v["scalar"], torch.tensor(2.5)), "0-d tensor")
        base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        check(same_tensor(v["base"], base), "base")
        check(same_tensor(v["view_t"], base.t()) and v["view_t"].stride() == (1, 4), "view_t")
        check(same_tensor(v["view_rows"], base[1:3]) and v["view_rows"].storage_offset() == 4,
              "view_rows")
        ptr = storage_identity(v["base"])
        check(storage_identity(v["view_t"]) == ptr and
              storage_identity(v["view_rows"]) == ptr, "views share one storage")
        v["base"][0, 1] = 100
        check(float(v["view_t"][1, 0]) == 100, "a write through one view shows in the other")
        check(not any(t.requires_grad for t in v.values() if torch.is_tensor(t)), "no grad")


def check_floats():
    a, b = load("floats.pt", safe=TORCH2)
    for v in [a] + ([b] if b is not None else []):
        f = v["floats"]
        check(f[:3] == [0.5, -1e300, 1e-310] and f[3] == math.inf and f[5] == 0.1, f"{f}")
        check(f[4] == 0.0 and math.copysign(1, f[4]) == -1, "-0.0")


def check_bytes():
    a, b = load("bytes.pt", safe=TORCH2)
    for v in [a] + ([b] if b is not None else []):
        check(v == {"b": bytes(range(256)), "e": b""}, "bytes")


def check_mlp():
    """examples/torch/mnist_mlp.py's model loads the C MLP's state dict and gives the same
    forward on the input the C program used."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                          nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    sd, sd_safe = load("mlp.pt")
    check(list(sd.keys()) == list(model.state_dict().keys()), f"mlp keys {list(sd.keys())}")
    check(not any(v.requires_grad for v in sd.values()), "mlp: requires_grad False")
    model.load_state_dict(sd_safe, strict=True)
    model.eval()
    io, _ = load("mlp_io.pt")
    with torch.no_grad():
        y = model(io["x"])
    # float32 sums of 784 products in another order: agreement to ~1e-6 relative
    check(torch.allclose(y, io["y"], rtol=1e-5, atol=1e-5),
          f"mlp forward: max diff {(y - io['y']).abs().max()}")


def check_many():
    for v in load("many.pt"):
        check(len(v) == 70000 and all(int(v[f"t{i}"][0]) == i for i in range(0, 70000, 997))
              and int(v["t69999"][0]) == 69999, "70000 tensors")
    with zipfile.ZipFile(os.path.join(D, "many.pt")) as z:
        check(len(z.infolist()) == 70003, "70003 zip entries (zip64 end record)")


# ---- part 2: files described by expected.manifest + expected.ptfx ---------------------------

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool]


def read_ptfx(path):
    """tests/fixtures/gen_fixtures.py's format -> {name: (dtype, shape, bytes)}"""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"PTFX"
    _, count = struct.unpack_from("<II", data, 4)
    pos = 12
    for _ in range(count):
        (nl,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2:pos + 2 + nl].decode()
        pos += 2 + nl
        dt, nd = data[pos], data[pos + 1]
        shape = struct.unpack_from(f"<{nd}q", data, pos + 2)
        pos += 2 + 8 * nd
        (nb,) = struct.unpack_from("<Q", data, pos)
        out[name] = (DTYPES[dt], tuple(shape), data[pos + 8:pos + 8 + nb])
        pos += 8 + nb
    return out


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def same_as_record(t, rec, what):
    dtype, shape, raw = rec
    check(t.dtype == dtype and tuple(t.shape) == shape,
          f"{what}: {t.dtype} {tuple(t.shape)}, written {dtype} {shape}")
    if t.dtype == dtype and tuple(t.shape) == shape:
        check(tensor_bytes(t) == raw, f"{what}: values differ from what was written")


class Described:
    """Walks torch's object next to expected.manifest's lines for one file."""

    def __init__(self, lines, fx, name):
        self.lines, self.fx, self.name = lines, fx, name
        self.pos = lines.index(f"file {name}") + 1
        self.storage = {}   # manifest storage number -> torch storage id
        self.seen = {}      # torch storage id -> manifest storage number

    def node(self, v, depth):
        line = self.lines[self.pos]
        self.pos += 1
        parts = line.split(" ")
        where = f"{self.name} '{line[:80]}'"
        check(int(parts[0]) == depth, f"{where}: depth")
        kind, rest = parts[1], parts[2:]
        if kind == "N":
            check(v is None, f"{where}: got {type(v)}")
        elif kind == "B":
            check(v is (rest[0] == "1"), f"{where}: got {v!r}")
        elif kind == "I":
            check(type(v) is int and v == int(rest[0]), f"{where}: got {v!r}")
        elif kind == "F":
            check(type(v) is float and struct.pack(">d", v).hex() == rest[0], f"{where}: {v!r}")
        elif kind in "SY":
            raw = b"" if rest[0] == "-" else bytes.fromhex(rest[0])
            want = raw.decode() if kind == "S" else raw
            check(type(v) is type(want) and v == want, f"{where}: got {v!r}")
        elif kind == "T":
            self.tensor(v, rest, where)
        elif kind in "LUD":
            n = int(rest[0])
            typ = {"L": list, "U": tuple, "D": dict}[kind]
            ok = isinstance(v, typ) and len(v) == n
            check(ok, f"{where}: got {type(v)} of {len(v) if hasattr(v, '__len__') else '-'}")
            if not ok:
                raise RuntimeError(f"{where}: structure differs, stopping this file")
            items = v.items() if kind == "D" else [(None, x) for x in v]
            for k, x in items:
                if kind == "D":
                    self.node(k, depth + 1)
                self.node(x, depth + 1)
        else:
            raise RuntimeError(f"{where}: unknown kind")

    def tensor(self, t, rest, where):
        if not torch.is_tensor(t):
            check(False, f"{where}: got {type(t)}")
            return
        nd = int(rest[1])
        shape = tuple(int(x) for x in rest[2:2 + nd])
        stride = tuple(int(x) for x in rest[2 + nd:2 + 2 * nd])
        offset, sid, rg, record = int(rest[2 + 2 * nd]), int(rest[3 + 2 * nd]), \
            rest[4 + 2 * nd] == "1", rest[5 + 2 * nd]
        check(t.dtype == DTYPES[int(rest[0])], f"{where}: dtype {t.dtype}")
        check(tuple(t.shape) == shape and t.stride() == stride,
              f"{where}: shape {tuple(t.shape)} stride {t.stride()}")
        check(t.storage_offset() == offset, f"{where}: storage offset {t.storage_offset()}")
        check(t.requires_grad == rg, f"{where}: requires_grad {t.requires_grad}")
        same_as_record(t, self.fx[record], where)
        key = storage_identity(t)
        if sid in self.storage:
            check(self.storage[sid] == key, f"{where}: torch does not share storage {sid}")
        else:
            check(key not in self.seen or t.numel() == 0,
                  f"{where}: torch shares it with storage {self.seen.get(key)}")
            self.storage[sid] = key
            self.seen.setdefault(key, sid)


# PromeTorch writes torch 1.13's state-dict layouts. Later torch versions added keys (and
# dropped StepLR's 'verbose'); their load_state_dict fills what is missing with defaults, so
# on those versions the keys may differ by exactly these names.
KEYS_ADDED_AFTER_1_13 = {"decoupled_weight_decay", "_is_initial"}
KEYS_DROPPED_AFTER_1_13 = {"verbose"}


def same_keys_across_versions(ours, torchs):
    ours, torchs = list(ours), list(torchs)
    if torch.__version__.startswith("1."):
        return ours == torchs
    strip = lambda keys, drop: [k for k in keys if k not in drop]
    return strip(ours, KEYS_DROPPED_AFTER_1_13) == strip(torchs, KEYS_ADDED_AFTER_1_13)


def storage_identity(t):
    """The identity of t's storage: its C object on torch 1.13, its data pointer on 2.x."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().data_ptr()
    return t.storage()._storage._cdata


def load_safe_or_not(path):
    """torch.load(weights_only=True); torch 1.13's safe unpickler lacks BINFLOAT and
    _codecs.encode, so there a refusal falls back to weights_only=False (reported)."""
    try:
        return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as e:
        check(not TORCH2, f"{path}: weights_only=True refused it: {e}")
        print(f"note: torch {torch.__version__} weights_only=True cannot read "
              f"{os.path.basename(path)} ({str(e).splitlines()[-1][:80]}); used weights_only=False")
        return torch.load(path, weights_only=False)


def small_net():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))


def check_described():
    with open(os.path.join(D, "expected.manifest")) as f:
        lines = [ln.rstrip("\n") for ln in f if not ln.startswith("#")]
    fx = read_ptfx(os.path.join(D, "expected.ptfx"))
    loaded = {}
    for name in ["nn_state_dict.pt", "training.pt", "views.pt", "dtypes.pt"]:
        path = os.path.join(D, name)
        for v in (load_safe_or_not(path), torch.load(path, weights_only=False)):
            try:
                Described(lines, fx, name).node(v, 0)
            except RuntimeError as e:
                check(False, str(e))
        loaded[name] = v
    try:
        from safetensors import safe_open
        from safetensors.torch import load_file
    except ImportError:
        print("safetensors not importable: the .safetensors files are not checked")
    else:
        for name in ["nn_state_dict.safetensors", "tensors.safetensors"]:
            path = os.path.join(D, name)
            got = load_file(path)
            stem = os.path.splitext(name)[0] + "."
            want = {k[len(stem):]: r for k, r in fx.items() if k.startswith(stem)}
            check(sorted(got) == sorted(want), f"{name}: keys {sorted(got)}")
            for k in want:
                if k in got:
                    same_as_record(got[k], want[k], f"{name} {k}")
        with safe_open(os.path.join(D, "tensors.safetensors"), "pt") as f:
            check(f.metadata() == {"format": "pt"}, f"metadata {f.metadata()}")
        loaded["safetensors"] = load_file(os.path.join(D, "nn_state_dict.safetensors"))

    # the state dicts work in torch: a strict load_state_dict, then the same forward
    for sd in [loaded["nn_state_dict.pt"], loaded["training.pt"]["model"],
               loaded.get("safetensors")]:
        if sd is None:
            continue
        model = small_net()
        r = model.load_state_dict(sd, strict=True)
        check(not r.missing_keys and not r.unexpected_keys, "load_state_dict")
        model.eval()
        x = torch.frombuffer(bytearray(fx["nn.x"][2]), dtype=torch.float32).reshape(fx["nn.x"][1])
        y = torch.frombuffer(bytearray(fx["nn.y"][2]), dtype=torch.float32).reshape(fx["nn.y"][1])
        with torch.no_grad():
            out = model(x)
        # float32 sums in another order
        check(torch.allclose(out, y, rtol=1e-5, atol=1e-6),
              f"forward differs by {(out - y).abs().max()}")
    # the optimizer and scheduler state load into torch's Adam / StepLR with torch's keys
    ck = loaded["training.pt"]
    model = small_net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    ref_opt, ref_sched = opt.state_dict(), sched.state_dict()
    opt.load_state_dict(ck["optimizer"])
    sched.load_state_dict(ck["scheduler"])
    got = ck["optimizer"]["param_groups"][0]
    check(same_keys_across_versions(got, ref_opt["param_groups"][0]),
          f"Adam param_group keys {list(got)} vs torch {list(ref_opt['param_groups'][0])}")
    check(same_keys_across_versions(ck["scheduler"], ref_sched),
          f"StepLR keys {list(ck['scheduler'])} vs torch {list(ref_sched)}")
    check(sched.last_epoch == 3 and opt.param_groups[0]["lr"] == 0.005,
          f"StepLR after 3 steps: last_epoch {sched.last_epoch}, lr {opt.param_groups[0]['lr']}")
    st = opt.state_dict()["state"]
    check(sorted(st) == list(range(len(list(model.parameters())))) and
          all(float(s["step"]) == 3 for s in st.values()), "Adam state: 3 steps per parameter")


def main():
    for name in ["state_dict.pt", "values.pt", "zip64.pt", "mlp.pt"]:
        check_zip(name)
    check_state_dict("state_dict.pt")
    check_state_dict("zip64.pt")
    check_same_pickle("state_dict.pt")
    check_same_pickle("mlp.pt")
    check_values()
    check_floats()
    check_bytes()
    check_mlp()
    check_many()
    check_described()
    print(f"{passed} passed, {len(failures)} failed (torch {torch.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
