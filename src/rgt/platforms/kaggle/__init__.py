"""Kaggle: kernels pushed and polled through Kaggle's API (api.py, platform.py)."""
