"""edgebench: benchmark TensorFlow models on the edge, honestly."""

__version__ = "0.2.0"

SCHEMA_VERSION = 2  # 2: warmup_ms is one summary object in every row (edgebench.rows documents the history)
