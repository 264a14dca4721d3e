"""RunPod: rented pods through the REST API v2 (api.py) and the platform's hooks (platform.py)."""
