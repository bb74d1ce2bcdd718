"""The readiness workflow: does a model compile for each SoC's NPU (AOT plugins, host checks, rows)."""
