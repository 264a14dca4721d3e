"""Lambda Cloud: rented instances through Lambda's public REST API (platform.py)."""
