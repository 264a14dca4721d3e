"""Slurm: batch jobs on a cluster reached through its login node (platform.py)."""
