"""Every loader of a user's model (SavedModel, Keras, .h5, frozen graph, PyTorch, .tflite) and the allow-lists that guard them."""
