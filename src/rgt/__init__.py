"""rgt — remote GPU trainer.

Run long training jobs on GPUs you rent but do not own, with one lifecycle on every platform
(up → push → run → watch → pull → verify → down), platform differences held as data
(`rgt.profiles`), checkpoint-and-resume as a library (`rgt.ckpt`), and teardown refused until
the results are pulled, re-hashed and loaded.
"""

__version__ = "0.1.0"
