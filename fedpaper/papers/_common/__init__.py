"""What the paper packages repeat: per-seed summaries of a table's cells and the claim
preamble of papers whose artifacts are not implemented yet. Only reads results (not part of any
paper's results-cache key)."""
