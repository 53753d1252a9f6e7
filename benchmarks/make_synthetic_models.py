#!/usr/bin/env python3
"""Writes random-weight llama-architecture GGUF models of ~0.5B, ~1B and ~3B parameters for the
speed benchmarks (benchmarks/llm_vs_llamacpp.py), in Q4_K_M, Q6_K and Q8_0.

    PYTHON_WITH_GGUF_AND_NUMPY benchmarks/make_synthetic_models.py OUT_DIR \\
        [--vocab-from data/models/SmolLM2-135M-Instruct.Q4_1.gguf] \\
        [--size 0.5b --size 1b --size 3b] [--quant q4_k_m --quant q6_k --quant q8_0]

writes OUT_DIR/SIZE-QUANT.gguf (e.g. OUT_DIR/llama3.2-1b-shape-q4_k_m.gguf) for each size and
quant asked for (default: all nine, ~12 GB). Nothing is quantized: every weight tensor is written
as random quant blocks (random bytes for the packed quants and sub-block scales; the fp16 super-
block scales d / dmin are set to sane finite values), so a 3B model takes seconds, not the
minutes and 12 GB of float32 a quantizer would need. Speed does not depend on the values; the
values only have to stay finite (the scales give weights of standard deviation ~0.02, the norms
are 1) so that neither engine meets NaN/Inf or denormals. The logits are nearly flat, so the two
engines' greedy ids diverge early (near ties); correctness is test_llm_models' job.

Shapes (SIZES below), all llama architecture with the output tied to token_embd, as in the
models they copy:
    qwen1.5-0.5b-shape   n_embd 1024, 24 layers, 16 heads / 16 KV heads of 64, n_ff 2816,
                         vocab 151936: 0.46B parameters. (Qwen2.5-0.5B's n_embd 896 is not a
                         multiple of the K-quants' 256-value blocks: llama.cpp falls back to
                         Q5_0/Q8_0 for it, so it would not measure the K-quant kernels.)
    llama3.2-1b-shape    n_embd 2048, 16 layers, 32 / 8 heads of 64, n_ff 8192, vocab 128256,
                         rope base 500000: 1.24B.
    llama3.2-3b-shape    n_embd 3072, 28 layers, 24 / 8 heads of 128, n_ff 8192, vocab 128256,
                         rope base 500000: 3.21B.

Quant mixes:
    q4_k_m  llama.cpp's Q4_K_M mix (llama_tensor_get_type): Q4_K everywhere except Q6_K for the
            tied token_embd (it is the output matrix), and for attn_v and ffn_down of the layers
            where llama.cpp's use_more_bits(i, n) holds (i < n/8, i >= 7n/8, (i - n/8) % 3 == 2).
    q6_k    Q6_K everywhere.        q8_0    Q8_0 everywhere.
Norm weights are float32 ones.

Tokenizer: every tokenizer.* key of --vocab-from (SmolLM2's GPT-2 byte-level BPE, 49152 tokens
with its merges and chat template), with the token list padded to the model's vocabulary by
normal tokens "synthetic000000", ... (byte-level strings no merge produces: never emitted by the
tokenizer, they give the output matrix and the embedding table their real size). Both
llama.cpp (llama-cpp-python 0.3.36) and PromeTorch (llm_bench, pt-inspect) load the files.
"""
import argparse
import os
import sys

import numpy as np
import gguf

SIZES = {
    "0.5b": dict(name="qwen1.5-0.5b-shape", n_embd=1024, n_layer=24, n_head=16, n_head_kv=16,
                 head_dim=64, n_ff=2816, n_vocab=151936, rope_base=1000000.0, rms_eps=1e-6),
    "1b": dict(name="llama3.2-1b-shape", n_embd=2048, n_layer=16, n_head=32, n_head_kv=8,
               head_dim=64, n_ff=8192, n_vocab=128256, rope_base=500000.0, rms_eps=1e-5),
    "3b": dict(name="llama3.2-3b-shape", n_embd=3072, n_layer=28, n_head=24, n_head_kv=8,
               head_dim=128, n_ff=8192, n_vocab=128256, rope_base=500000.0, rms_eps=1e-5),
}
Q = gguf.GGMLQuantizationType
QUANTS = {"q4_k_m": (Q.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_M),
          "q6_k": (Q.Q6_K, gguf.LlamaFileType.MOSTLY_Q6_K),
          "q8_0": (Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0)}
TARGET_STD = 0.02  # weight standard deviation the scales aim at


def use_more_bits(i, n):
    """llama.cpp's choice of the layers whose attn_v / ffn_down get Q6_K in Q4_K_M."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_type(quant, name, il, n_layer):
    base = QUANTS[quant][0]
    if quant != "q4_k_m":
        return base
    if name == "token_embd" or (name in ("attn_v", "ffn_down") and use_more_bits(il, n_layer)):
        return Q.Q6_K
    return base


def random_blocks(rng, qtype, rows, cols):
    """[rows, bytes per row] uint8: random quant blocks with finite fp16 scales."""
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block
    b = np.frombuffer(rng.bytes(nb * nbytes), dtype=np.uint8).reshape(nb, nbytes).copy()

    def f16_field(offset, values):
        b[:, offset:offset + 2] = values.astype(np.float16).view(np.uint8).reshape(nb, 2)

    jitter = rng.uniform(0.5, 1.5, nb).astype(np.float32)  # per-block scale, as real data has
    if qtype == Q.Q8_0:  # d, qs[32] int8 (std ~74)
        f16_field(0, TARGET_STD / 74.0 * jitter)
    elif qtype == Q.Q4_K:  # d, dmin, scales[12] (6-bit scale/min pairs), qs[128] 4-bit
        d = TARGET_STD / (32.0 * 4.6) * jitter  # scale ~32, q std ~4.6
        f16_field(0, d)
        f16_field(2, d * 7.5)  # min * dmin ~ scale * mean(q) * d: the blocks center near 0
    elif qtype == Q.Q6_K:  # ql[128], qh[64], scales[16] int8, d
        f16_field(208, TARGET_STD / (74.0 * 18.5) * jitter)  # scale std ~74, q-32 std ~18.5
    else:
        raise ValueError(qtype)
    return b.reshape(rows, cols // block * nbytes)


def copy_tokenizer(w, src_path, n_vocab):
    """Every tokenizer.* key of src_path, the token list padded to n_vocab normal tokens."""
    r = gguf.GGUFReader(src_path)
    for field in r.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                val = [bytes(field.parts[i]) for i in field.data]
            else:
                val = [field.parts[i].tolist()[0] for i in field.data]
            if field.name == "tokenizer.ggml.tokens":
                have = set(val)
                pad = [f"synthetic{i:06d}".encode() for i in range(n_vocab - len(val))]
                assert not have.intersection(pad) and len(val) <= n_vocab
                val += pad
            elif field.name in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
                fill = int(gguf.TokenType.NORMAL) if "type" in field.name else 0.0
                val += [fill] * (n_vocab - len(val))
            w.add_key_value(field.name, val, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_key_value(field.name, bytes(field.parts[field.data[0]]), vtype)
        else:
            w.add_key_value(field.name, field.parts[field.data[0]].tolist()[0], vtype)


def tensor_list(s):
    """(name, rows, cols, layer) of every tensor, in file order; rows = output features."""
    e, hd, kv = s["n_embd"], s["head_dim"], s["n_head_kv"] * s["head_dim"]
    out = [("token_embd", s["n_vocab"], e, -1)]
    for il in range(s["n_layer"]):
        out += [("attn_norm", 1, e, il), ("attn_q", s["n_head"] * hd, e, il),
                ("attn_k", kv, e, il), ("attn_v", kv, e, il),
                ("attn_output", e, s["n_head"] * hd, il), ("ffn_norm", 1, e, il),
                ("ffn_gate", s["n_ff"], e, il), ("ffn_up", s["n_ff"], e, il),
                ("ffn_down", e, s["n_ff"], il)]
    return out + [("output_norm", 1, e, -1)]


def full_name(name, il):
    return f"blk.{il}.{name}.weight" if il >= 0 else f"{name}.weight"


def write_model(path, size, quant, vocab_from, seed):
    s = SIZES[size]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(f"{s['name']}-random")
    w.add_context_length(8192)
    w.add_embedding_length(s["n_embd"])
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(s["n_ff"])
    w.add_head_count(s["n_head"])
    w.add_head_count_kv(s["n_head_kv"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_dimension_count(s["head_dim"])
    w.add_rope_freq_base(s["rope_base"])
    w.add_layer_norm_rms_eps(s["rms_eps"])
    w.add_vocab_size(s["n_vocab"])
    w.add_file_type(QUANTS[quant][1])
    copy_tokenizer(w, vocab_from, s["n_vocab"])
    tensors = tensor_list(s)
    n_params = 0
    for name, rows, cols, il in tensors:
        n_params += rows * cols
        if rows == 1:  # norm weight, float32
            w.add_tensor_info(full_name(name, il), (cols,), np.dtype(np.float32), cols * 4)
            continue
        qt = tensor_type(quant, name, il, s["n_layer"])
        block, nbytes = gguf.GGML_QUANT_SIZES[qt]
        w.add_tensor_info(full_name(name, il), (rows, cols // block * nbytes),
                          np.dtype(np.uint8), rows * cols // block * nbytes, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, rows, cols, il in tensors:
        if rows == 1:
            w.write_tensor_data(np.ones(cols, dtype=np.float32))
        else:
            w.write_tensor_data(random_blocks(rng, tensor_type(quant, name, il, s["n_layer"]),
                                              rows, cols))
    w.close()
    print(f"{path}: {n_params / 1e9:.3f}B parameters, {os.path.getsize(path) / 1e6:.1f} MB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--vocab-from", default="data/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                    help="GGUF whose tokenizer.* keys are copied (a GPT-2 BPE vocabulary)")
    ap.add_argument("--size", action="append", choices=list(SIZES))
    ap.add_argument("--quant", action="append", choices=list(QUANTS))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not os.path.exists(args.vocab_from):
        sys.exit(f"--vocab-from {args.vocab_from}: no such file")
    os.makedirs(args.out_dir, exist_ok=True)
    for size in args.size or list(SIZES):
        for quant in args.quant or list(QUANTS):
            path = os.path.join(args.out_dir, f"{SIZES[size]['name']}-{quant}.gguf")
            write_model(path, size, quant, args.vocab_from, args.seed)


if __name__ == "__main__":
    main()
