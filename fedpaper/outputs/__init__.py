"""Outputs: an artifact's parameters and profiles (`parameters`), running and writing an artifact
(`artifacts`: sweep, table, figure, provenance) and the dry run (`dryrun`). Above the runs, below
the papers (ARCHITECTURE.md)."""
