"""Ahead-of-time NPU compilation on this host (``edgebench readiness``).

``vendors`` is the only place that finds vendor libraries (the QNN libraries of an installed
``onnxruntime-qnn`` or a QAIRT SDK, OpenVINO's from the ``openvino`` package, ...) and says what is
missing; ``compile`` runs LiteRT's ``apply_plugin_main`` once per (model, SoC) in a process of its
own, with a time limit and a private temporary folder, and reads its log into a typed result;
``plugin_log`` is the parser of that log. Nothing here is shipped from a vendor: libraries are
found where the user installed them.
"""
