"""The bench workflow: host and device runs, sustained/paced load, peak FLOP/s."""
