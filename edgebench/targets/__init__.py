"""Targets: where a model runs (TF reference, host LiteRT, adb devices)."""
