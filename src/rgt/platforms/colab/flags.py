"""Colab's own `rgt up` flag (rgt.platforms.options): where Google Drive shows on this
machine."""

from __future__ import annotations

from rgt.platforms.options import Option

UP = (
    Option("drive", str, "Colab: the folder where Google Drive for desktop (or `rclone mount`) "
                         "shows your My Drive; runs, notebooks and checkpoints go under its "
                         "rgt/.", "Colab (--profile colab)"),
)
