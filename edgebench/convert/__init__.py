"""Conversion to .tflite per precision, its worker process, and quantization analysis."""
