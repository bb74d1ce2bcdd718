"""The llm-bench workflow over LiteRT-LM bundles."""
