"""Quantization analysis below ``convert``: per-layer error (``layers``), keeping tensors float
(``keep_float``) and the search that proves which (``search``)."""
