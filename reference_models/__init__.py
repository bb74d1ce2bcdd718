"""Reference model builders, one module per architecture.

Each builder module defines ``TASK``, ``DESCRIPTION``, ``BUILDER_VERSION``, ``CONFIGS`` (per size),
``inputs(cfg)``, ``build_keras(cfg, seed)``, ``training_batch(cfg, batch_size, seed)``,
``training_loss(cfg)`` and ``build(cfg, seed, out_dir) -> info extras``. TensorFlow/Keras are
imported inside the functions so that listing models stays cheap. ``edgebench.model.catalog`` is the
public API (registry, caching, validation); use that, not these modules directly.
"""

from __future__ import annotations

from reference_models import bert, digits, mobilenetv2, resnet50, ssd_mobilenet

BUILDERS = {
    "digits": digits,
    "resnet50": resnet50,
    "mobilenetv2": mobilenetv2,
    "bert": bert,
    "ssd_mobilenet": ssd_mobilenet,
}
