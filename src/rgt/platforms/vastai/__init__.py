"""vast.ai: rented containers from the marketplace's offers (platform.py)."""
