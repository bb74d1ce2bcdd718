"""Known device profiles (one YAML per device), matched by ro.product.model / board."""
