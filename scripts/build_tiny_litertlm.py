#!/usr/bin/env python3
"""Build the tiny LiteRT-LM test bundles committed under tests/fixtures/llm/.

A TinyLlama-architecture decoder (litert-torch's generative API: RMSNorm, rotary attention with
grouped queries, gated SiLU feed-forward) with random weights, the smallest shape that still runs
every part an LLM benchmark measures: a prefill signature (several tokens into the KV cache), a
decode signature (one token at a time reading the cache) and an external KV cache of a fixed
context. The tokenizer is SentencePiece trained on this repository's README. Two bundles of the same
weights: fp32 and dynamic int8 (int8 weights, float activations), so the suite compares precisions.

Two settings are not optional (without them LiteRT-LM's engine fails every generation, or reports
0 tokens/s): the attention mask is an input (``mask_as_input=True``: the engine builds the causal
mask) and the KV cache uses the transposed layout LiteRT-LM's CPU executor expects
(``KV_LAYOUT_TRANSPOSED``).

Needs torch (CPU), litert-torch, litert-lm-builder and sentencepiece -- build-time only; the test
suite reads the committed output and needs none of them:

    pip install 'torch==2.13.0' litert-torch litert-lm-builder sentencepiece
    python scripts/build_tiny_litertlm.py --out tests/fixtures/llm

writes ``tiny-llama-f32.litertlm``, ``tiny-llama-q8.litertlm``, ``tiny-llama-bad-kv.litertlm`` (a
deliberately broken export: one layer, the default KV layout and an internal mask, the mistake the
paragraph above describes; the engine reads its context as 1 token and refuses every prompt, which
is what the suite's "the engine said INVALID_ARGUMENT" test needs) and ``SHA256SUMS`` (weights seeded,
so a rebuild with the same package versions gives the same weights; the converter's bytes may
differ between versions, which is why the sums are committed with the files).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The shape: 2 layers (so the KV cache has more than one entry), width 128, 4 query heads sharing
# 2 KV heads (grouped-query attention, as real small LLMs use), vocabulary 512 (enough for the
# README's words), context 256 tokens (the limit the suite's over-context test runs into).
LAYERS, DIM, HEADS, KV_HEADS, FFN, VOCAB = 2, 128, 4, 2, 256, 512
CONTEXT = 256
PREFILL_SIGNATURES = (32, 128)     # the engine picks one (or runs several) per prefill
SEED = 36
BROKEN_CONTEXT = 128               # the broken variant's metadata context (the engine will read 1)


def _tokenizer(workdir: Path) -> Path:
    import sentencepiece as spm

    prefix = workdir / "tiny_spm"
    spm.SentencePieceTrainer.train(
        input=str(ROOT / "README.md"), model_prefix=str(prefix), vocab_size=VOCAB, model_type="unigram",
        character_coverage=1.0, num_threads=1, bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
        input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2)
    return prefix.with_suffix(".model")


def _model(layers: int | None = None, dim: int | None = None, heads: int = HEADS, kv_heads: int = KV_HEADS,
           ffn: int | None = None, mask_cache: int = 0):
    import torch
    import litert_torch.generative.layers.model_config as cfg
    from litert_torch.generative.utilities import model_builder

    layers, dim, ffn = layers or LAYERS, dim or DIM, ffn or FFN
    attn = cfg.AttentionConfig(num_heads=heads, head_dim=dim // heads, num_query_groups=kv_heads,
                               rotary_base=10000, rotary_percentage=1.0)
    ff = cfg.FeedForwardConfig(type=cfg.FeedForwardType.GATED,
                               activation=cfg.ActivationConfig(cfg.ActivationType.SILU), intermediate_size=ffn)
    norm = cfg.NormalizationConfig(type=cfg.NormalizationType.RMS_NORM)
    block = cfg.TransformerBlockConfig(attn_config=attn, ff_config=ff, pre_attention_norm_config=norm,
                                       post_attention_norm_config=norm)
    config = cfg.ModelConfig(vocab_size=VOCAB, num_layers=layers, max_seq_len=CONTEXT, embedding_dim=dim,
                             block_configs=block, final_norm_config=norm,
                             lm_head_share_weight_with_embedding=True)
    torch.manual_seed(SEED)
    model = model_builder.DecoderOnlyModel(config, mask_cache_size=mask_cache)
    # nn.Linear's default init gives near-uniform logits; a wider spread makes greedy decoding
    # pick distinct tokens (the precision comparison needs outputs that can differ).
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.08)
    return model.eval(), config


def build(out: Path) -> dict[str, str]:
    from litert_torch.generative.layers import kv_cache as kv_utils
    from litert_torch.generative.utilities import converter, export_config

    out.mkdir(parents=True, exist_ok=True)
    sums = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tok = _tokenizer(work)
        model, config = _model()
        exp = export_config.ExportConfig(mask_as_input=True, kvcache_layout=kv_utils.KV_LAYOUT_TRANSPOSED)
        broken, broken_config = _model(layers=1, dim=32, heads=2, kv_heads=1, ffn=64, mask_cache=BROKEN_CONTEXT)
        variants = (("none", "tiny-llama-f32", model, config, exp, list(PREFILL_SIGNATURES), CONTEXT),
                    ("dynamic_int8", "tiny-llama-q8", model, config, exp, list(PREFILL_SIGNATURES), CONTEXT),
                    ("none", "tiny-llama-bad-kv", broken, broken_config, export_config.ExportConfig(), [32],
                     BROKEN_CONTEXT))
        for quantize, name, net, net_config, how, prefills, context in variants:
            stage = work / name
            stage.mkdir()
            converter.convert_to_litert(
                net, output_path=str(stage), output_name_prefix=name, prefill_seq_len=prefills,
                kv_cache_max_len=context, quantize=quantize, config=net_config, export_config=how,
                output_format="litertlm", tokenizer_model_path=str(tok), start_token_id=1, stop_token_ids=[2],
                llm_model_type="generic")
            built = [p for p in stage.iterdir() if p.suffix == ".litertlm"]
            if len(built) != 1:
                raise SystemExit(f"expected one .litertlm in {stage}, found {[p.name for p in stage.iterdir()]}")
            dest = out / f"{name}.litertlm"
            os.replace(built[0], dest)
            sums[dest.name] = hashlib.sha256(dest.read_bytes()).hexdigest()
    (out / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sorted(sums.items())))
    return sums


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "llm")
    ap.add_argument("--layers", type=int, default=LAYERS, help="a larger model for measurements (not the fixture)")
    ap.add_argument("--dim", type=int, default=DIM, help="model width (FFN = 2x width)")
    args = ap.parse_args(argv)
    if (args.layers, args.dim) != (LAYERS, DIM):
        globals().update(LAYERS=args.layers, DIM=args.dim, FFN=2 * args.dim)
    for name, digest in build(args.out).items():
        size = (args.out / name).stat().st_size
        print(f"{name}: {size:,} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
