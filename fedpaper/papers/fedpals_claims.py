"""The 32 claims of targets/fedpals.md section 3 (placeholder)."""
