#!/usr/bin/env python3
"""Build the "counting" LiteRT-LM test bundles: greedy output that never repeats, and a twin with a
planted divergence at a known position (tests/fixtures/llm/tiny-count-*.litertlm).

The random-weight tiny bundles (scripts/build_tiny_litertlm.py) repeat themselves after a few
tokens, so the token-agreement check of ``llm-bench`` could not be shown to fail at a known place.
These bundles use the same TinyLlama architecture, tokenizer recipe and converter, with weights set
by hand so greedy decoding walks a fixed cycle through the vocabulary:

* every transformer block's matrices are zero, so each block adds nothing to the residual stream
  and the final hidden state is the RMS-normalised embedding of the *last* token;
* the embedding rows are seeded Gaussian vectors, the (untied) LM head's row ``succ(i)`` is the
  embedding row of ``i``: the logit of ``succ(i)`` is about sqrt(128) = 11 standard deviations
  above every other logit, so the argmax is ``succ(i)`` in fp32 and in dynamic int8 alike;
* ``succ`` is one cycle through all 509 ordinary token ids (3..511; unk/bos/eos excluded, so
  decoding never stops early): 24 or even 500 greedy tokens never repeat.

``tiny-count-planted-f32`` is the same bundle with two LM-head rows swapped, chosen so that the
token at decode position ``PLANTED`` (0-based; the prompt's last token starts the walk) differs:
positions 0..PLANTED-1 agree, position PLANTED differs. The prompt is llm-bench's default
agreement prompt (``LlmBenchSettings.prompt``), tokenised with the bundle's own tokenizer; after
building, the script decodes both bundles with the real engine (``litert_lm``) and refuses to write
files whose divergence is anywhere else.

    pip install 'torch==2.13.0' litert-torch litert-lm-builder sentencepiece litert-lm-api
    python scripts/build_counting_litertlm.py --out tests/fixtures/llm

writes ``tiny-count-f32.litertlm``, ``tiny-count-q8.litertlm`` (dynamic int8, same weights: full
agreement expected), ``tiny-count-planted-f32.litertlm`` and adds their sums to ``SHA256SUMS``.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

import build_tiny_litertlm as tiny  # noqa: E402  (the tokenizer recipe and the shape)

PLANTED = 6          # the first decode position where the planted twin differs
SEED = 47
DECODE_CHECK = 24    # tokens decoded by the build-time check
FIRST_ORDINARY = 3   # 0 unk, 1 bos, 2 eos


def _cycle(vocab: int, seed: int) -> list[int]:
    import random

    order = list(range(FIRST_ORDINARY, vocab))
    random.Random(seed).shuffle(order)
    return order


def _model(succ: dict[int, int]):
    import torch
    import litert_torch.generative.layers.model_config as cfg
    from litert_torch.generative.utilities import model_builder

    attn = cfg.AttentionConfig(num_heads=tiny.HEADS, head_dim=tiny.DIM // tiny.HEADS,
                               num_query_groups=tiny.KV_HEADS, rotary_base=10000, rotary_percentage=1.0)
    ff = cfg.FeedForwardConfig(type=cfg.FeedForwardType.GATED,
                               activation=cfg.ActivationConfig(cfg.ActivationType.SILU),
                               intermediate_size=tiny.FFN)
    norm = cfg.NormalizationConfig(type=cfg.NormalizationType.RMS_NORM)
    block = cfg.TransformerBlockConfig(attn_config=attn, ff_config=ff, pre_attention_norm_config=norm,
                                       post_attention_norm_config=norm)
    config = cfg.ModelConfig(vocab_size=tiny.VOCAB, num_layers=tiny.LAYERS, max_seq_len=tiny.CONTEXT,
                             embedding_dim=tiny.DIM, block_configs=block, final_norm_config=norm,
                             lm_head_share_weight_with_embedding=False)
    torch.manual_seed(SEED)
    model = model_builder.DecoderOnlyModel(config, mask_cache_size=0)
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for p in model.transformer_blocks.parameters():
            if p.dim() > 1:
                p.zero_()                      # each block adds nothing: x stays the embedding
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.fill_(1.0)                   # plain RMS normalisation
        emb = torch.randn(tiny.VOCAB, tiny.DIM, generator=gen)
        model.tok_embedding.weight.copy_(emb)
        head = torch.zeros(tiny.VOCAB, tiny.DIM)
        for i, j in succ.items():
            head[j] = emb[i] / emb[i].norm()   # logit of succ(i) ~ |x| = sqrt(DIM); others ~ N(0, 1)
        model.lm_head.weight.copy_(head)
        if model.lm_head.bias is not None:
            model.lm_head.bias.zero_()
    return model.eval(), config


def _greedy(path: Path, prompt: str, n: int) -> list[str]:
    import litert_lm as lm

    lm.set_min_log_severity(lm.LogSeverity.ERROR)
    engine = lm.Engine(str(path), backend=lm.interfaces.CPU(thread_count=1), cache_dir=":nocache")
    try:
        session = engine.create_session(apply_prompt_template=False,
                                        sampler_config=lm.SamplerConfig(top_k=1, temperature=0.0, seed=0),
                                        max_output_tokens=n)
        try:
            session.run_prefill([prompt])
            return [r.texts[0] if r.texts else "" for r in session.run_decode_async()]
        finally:
            session.close()
    finally:
        engine.close()


def build(out: Path) -> dict[str, str]:
    import sentencepiece as spm
    from litert_torch.generative.layers import kv_cache as kv_utils
    from litert_torch.generative.utilities import converter, export_config

    from edgebench.llm.bench import LlmBenchSettings

    prompt = LlmBenchSettings(bundles=("x",)).prompt
    out.mkdir(parents=True, exist_ok=True)
    sums: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tok = tiny._tokenizer(work)
        last = spm.SentencePieceProcessor(model_file=str(tok)).encode(prompt)[-1]
        order = _cycle(tiny.VOCAB, SEED)
        succ = {order[k]: order[(k + 1) % len(order)] for k in range(len(order))}
        walk = [last]
        for _ in range(DECODE_CHECK + 1):
            walk.append(succ[walk[-1]])
        # decode position p emits walk[p + 1]; swap the head rows of walk[PLANTED + 1] and a token far
        # along the cycle, so position PLANTED (input walk[PLANTED]) emits that token instead
        a = walk[PLANTED + 1]
        b = order[(order.index(a) + len(order) // 2) % len(order)]
        inv = {j: i for i, j in succ.items()}
        planted = dict(succ)
        planted[inv[a]], planted[inv[b]] = b, a
        exp = export_config.ExportConfig(mask_as_input=True, kvcache_layout=kv_utils.KV_LAYOUT_TRANSPOSED)
        for quantize, name, table in (("none", "tiny-count-f32", succ), ("dynamic_int8", "tiny-count-q8", succ),
                                      ("none", "tiny-count-planted-f32", planted)):
            net, net_config = _model(table)
            stage = work / name
            stage.mkdir()
            converter.convert_to_litert(
                net, output_path=str(stage), output_name_prefix=name, prefill_seq_len=list(tiny.PREFILL_SIGNATURES),
                kv_cache_max_len=tiny.CONTEXT, quantize=quantize, config=net_config, export_config=exp,
                output_format="litertlm", tokenizer_model_path=str(tok), start_token_id=1, stop_token_ids=[2],
                llm_model_type="generic")
            (built,) = [p for p in stage.iterdir() if p.suffix == ".litertlm"]
            os.replace(built, work / f"{name}.litertlm")
        got = {n: _greedy(work / f"{n}.litertlm", prompt, DECODE_CHECK)
               for n in ("tiny-count-f32", "tiny-count-q8", "tiny-count-planted-f32")}
        ref = got["tiny-count-f32"]
        if len(set(ref)) != len(ref) or len(ref) != DECODE_CHECK:
            raise SystemExit(f"tiny-count-f32 repeats or stops: {ref}")
        if got["tiny-count-q8"] != ref:
            raise SystemExit(f"tiny-count-q8 differs from fp32: {got['tiny-count-q8']} vs {ref}")
        diff = next((i for i, (x, y) in enumerate(zip(ref, got["tiny-count-planted-f32"])) if x != y), None)
        if diff != PLANTED:
            raise SystemExit(f"planted divergence at {diff}, wanted {PLANTED}: {got['tiny-count-planted-f32']}")
        for n in got:
            dest = out / f"{n}.litertlm"
            os.replace(work / f"{n}.litertlm", dest)
            sums[dest.name] = hashlib.sha256(dest.read_bytes()).hexdigest()
        print("greedy fp32:   ", ref)
        print("greedy planted:", got["tiny-count-planted-f32"])
    old = {}
    sums_file = out / "SHA256SUMS"
    if sums_file.exists():
        old = dict(reversed(line.split()) for line in sums_file.read_text().splitlines() if line.strip())
    old.update(sums)
    sums_file.write_text("".join(f"{h}  {n}\n" for n, h in sorted(old.items())))
    return sums


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "llm")
    args = ap.parse_args(argv)
    for name, digest in build(args.out).items():
        print(f"{name}: {(args.out / name).stat().st_size:,} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
