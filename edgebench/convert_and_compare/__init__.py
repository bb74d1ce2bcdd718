"""The convert-and-compare and compare workflows."""
