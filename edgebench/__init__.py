"""edgebench: benchmark TensorFlow models on the edge, honestly."""

__version__ = "0.1.0"

SCHEMA_VERSION = 1
