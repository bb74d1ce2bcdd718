"""Records and verdicts: drift, statistics, change verdicts, the gate, one outcome per row."""
