"""The ground floor: errors, paths, atomic writes, bounded readers, printable text, redaction, the result file envelope, latency statistics' pure functions."""
