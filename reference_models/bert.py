"""``bert``: the BERT-Base encoder written with Keras layers (random weights, no download).

Post-LN transformer encoder as in Devlin et al. 2018 / Google's reference implementation:
word + position + token-type (segment 0) embeddings, LayerNorm (eps 1e-12), dropout 0.1, then
``layers`` x [multi-head self-attention -> add & LayerNorm -> GELU (erf) feed-forward 4*hidden ->
add & LayerNorm], and the tanh pooler on the first ([CLS]) token. ``full`` = BERT-Base: 12 layers,
hidden 768, 12 heads, sequence 128 (position table of 512 as in BERT), vocabulary 30,522
(109,482,240 parameters, the published count). Inputs ``input_ids`` and ``attention_mask`` (int32, [batch, seq]); outputs
``pooled_output`` [batch, hidden] and ``sequence_output`` [batch, seq, hidden].
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from reference_models import _export

TASK = "embedding"
DESCRIPTION = "BERT-Base encoder (Keras layers), random weights; pooled + sequence outputs"
BUILDER_VERSION = 1
CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {"layers": 2, "hidden": 64, "heads": 2, "seq_len": 16, "max_positions": 16, "vocab": 1000,
             "calibration_samples": 100, "evaluation_samples": 64},
    "full": {"layers": 12, "hidden": 768, "heads": 12, "seq_len": 128, "max_positions": 512, "vocab": 30522,
             "calibration_samples": 100, "evaluation_samples": 32},
}
# Special token ids of the uncased BERT vocabulary ([PAD]=0, [CLS]=101, [SEP]=102); ordinary
# word pieces start at 999 in the real vocabulary (1000 ids are reserved/unused/special).
PAD_ID, CLS_ID, SEP_ID = 0, 101, 102
TRAINING_CLASSES = 2  # sentence-pair/sentiment style fine-tuning head for training baselines


def inputs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    seq = cfg["seq_len"]
    return [
        {"name": "input_ids", "shape": [None, seq], "dtype": "int32", "range": [0, cfg["vocab"] - 1]},
        {"name": "attention_mask", "shape": [None, seq], "dtype": "int32", "range": [0, 1]},
    ]


def _first_word_id(vocab: int) -> int:
    return 999 if vocab > 2000 else SEP_ID + 1


def token_batch(rng: np.random.Generator, n: int, cfg: dict[str, Any]) -> dict[str, np.ndarray]:
    """Valid token ids with realistic masks: [CLS] words... [SEP] then [PAD] up to seq_len.

    Lengths (incl. [CLS]/[SEP]) are uniform in [max(3, seq/4), seq]; the mask is 1 on real tokens
    and 0 on the trailing padding, as a tokenizer with padding="max_length" produces.
    """
    seq, vocab = cfg["seq_len"], cfg["vocab"]
    lengths = rng.integers(max(3, seq // 4), seq + 1, size=n)
    ids = np.full((n, seq), PAD_ID, dtype=np.int32)
    mask = np.zeros((n, seq), dtype=np.int32)
    words = rng.integers(_first_word_id(vocab), vocab, size=(n, seq), dtype=np.int32)
    for i, length in enumerate(lengths):
        ids[i, 0] = CLS_ID
        ids[i, 1:length - 1] = words[i, 1:length - 1]
        ids[i, length - 1] = SEP_ID
        mask[i, :length] = 1
    return {"input_ids": ids, "attention_mask": mask}


def build_encoder(cfg: dict[str, Any], seed: int = 0):
    """Keras functional encoder: {input_ids, attention_mask} -> {pooled_output, sequence_output}."""
    import keras  # noqa: PLC0415
    from keras import layers, ops  # noqa: PLC0415

    keras.utils.set_random_seed(seed)
    seq, hidden, heads = cfg["seq_len"], cfg["hidden"], cfg["heads"]
    init = keras.initializers.TruncatedNormal(stddev=0.02)  # BERT's initializer_range

    ids = keras.Input((seq,), dtype="int32", name="input_ids")
    mask = keras.Input((seq,), dtype="int32", name="attention_mask")

    word = layers.Embedding(cfg["vocab"], hidden, embeddings_initializer=init, name="word_embeddings")(ids)
    segment = layers.Embedding(2, hidden, embeddings_initializer=init, name="token_type_embeddings")(
        layers.Lambda(lambda t: ops.zeros_like(t), output_shape=(seq,), name="segment_ids")(ids))
    positions = layers.Embedding(cfg["max_positions"], hidden, embeddings_initializer=init,
                                 name="position_embeddings")(
        layers.Lambda(lambda t: ops.zeros_like(t) + ops.arange(seq, dtype="int32"), output_shape=(seq,),
                      name="position_ids")(ids))
    x = layers.Add(name="embeddings_sum")([word, segment, positions])
    x = layers.LayerNormalization(epsilon=1e-12, name="embeddings_ln")(x)
    x = layers.Dropout(0.1, name="embeddings_dropout")(x)
    # [batch, 1, seq] -> broadcast over query positions and heads inside MultiHeadAttention.
    attn_mask = layers.Lambda(lambda m: ops.cast(ops.expand_dims(m, 1), "bool"), output_shape=(1, seq),
                           name="attention_mask_3d")(mask)

    for i in range(cfg["layers"]):
        attn = layers.MultiHeadAttention(heads, hidden // heads, dropout=0.1, kernel_initializer=init,
                                         name=f"layer_{i}_attention")(x, x, attention_mask=attn_mask)
        attn = layers.Dropout(0.1, name=f"layer_{i}_attention_dropout")(attn)
        x = layers.LayerNormalization(epsilon=1e-12, name=f"layer_{i}_attention_ln")(
            layers.Add(name=f"layer_{i}_attention_add")([x, attn]))
        ff = layers.Dense(4 * hidden, activation="gelu", kernel_initializer=init, name=f"layer_{i}_intermediate")(x)
        ff = layers.Dense(hidden, kernel_initializer=init, name=f"layer_{i}_output")(ff)
        ff = layers.Dropout(0.1, name=f"layer_{i}_output_dropout")(ff)
        x = layers.LayerNormalization(epsilon=1e-12, name=f"layer_{i}_output_ln")(
            layers.Add(name=f"layer_{i}_output_add")([x, ff]))

    cls = layers.Lambda(lambda t: t[:, 0, :], output_shape=(hidden,), name="cls_token")(x)
    pooled = layers.Dense(hidden, activation="tanh", kernel_initializer=init, name="pooler")(cls)
    return keras.Model({"input_ids": ids, "attention_mask": mask},
                       {"pooled_output": pooled, "sequence_output": x}, name="bert_encoder")


def build_keras(cfg: dict[str, Any], seed: int = 0):
    """Encoder + 2-class softmax head on ``pooled_output`` (the usual fine-tuning setup)."""
    import keras  # noqa: PLC0415

    encoder = build_encoder(cfg, seed)
    pooled = encoder.output["pooled_output"]
    out = keras.layers.Dropout(0.1, name="classifier_dropout")(pooled)
    out = keras.layers.Dense(TRAINING_CLASSES, activation="softmax", name="classifier")(out)
    return keras.Model(encoder.input, out, name="bert_classifier")


def training_loss(cfg: dict[str, Any]):
    import keras  # noqa: PLC0415

    return keras.losses.SparseCategoricalCrossentropy(from_logits=False)


def training_batch(cfg: dict[str, Any], batch_size: int, seed: int = 0):
    """Valid token ids + masks and random 2-class labels (throughput baselines; not real data)."""
    rng = np.random.default_rng(seed)
    x = token_batch(rng, batch_size, cfg)
    return x, _export.synthetic_labels(rng, batch_size, TRAINING_CLASSES)


def build(cfg: dict[str, Any], seed: int, out_dir: Path) -> dict[str, Any]:
    import tensorflow as tf  # noqa: PLC0415

    encoder = build_encoder(cfg, seed)
    seq = cfg["seq_len"]

    def serve(input_ids, attention_mask):
        out = encoder({"input_ids": input_ids, "attention_mask": attention_mask}, training=False)
        return {"pooled_output": out["pooled_output"], "sequence_output": out["sequence_output"]}

    _export.export_saved_model(
        encoder, serve,
        [tf.TensorSpec([None, seq], tf.int32, name="input_ids"),
         tf.TensorSpec([None, seq], tf.int32, name="attention_mask")],
        out_dir / "saved_model",
    )
    rng = np.random.default_rng(seed)
    _export.save_npz(out_dir / "calibration.npz", token_batch(rng, cfg["calibration_samples"], cfg))
    _export.save_npz(out_dir / "evaluation.npz", token_batch(rng, cfg["evaluation_samples"], cfg))
    return {
        "class_output": None,
        "num_classes": None,
        "labels_real": False,
        "params": int(encoder.count_params()),
        "data_note": "random valid token ids ([CLS] ... [SEP] + trailing [PAD], mask 1/0); random weights, no labels",
    }
