"""Colab: a notebook the user runs, synced through Google Drive (platform.py)."""
