"""Runnable examples bundled with rgt (the demo and the Slurm tests run them)."""
