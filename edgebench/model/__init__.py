"""Models and data: the .tflite reader and rewriter, SavedModel signatures, the reference-model catalog, input sets and the state rule."""
