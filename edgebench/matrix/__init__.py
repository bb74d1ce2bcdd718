"""The YAML matrix workflow, its executors and the environment lock."""
