"""Networks added for the FedMT paper (registered by name in fedpaper.models.MODELS)."""
