"""The diagnose workflow: which layer breaks INT8 (or an accelerator), and the fix, proven."""
