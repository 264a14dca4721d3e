"""rgt — remote GPU trainer.

Run long training jobs on GPUs you rent but do not own, with one lifecycle on every platform
(up → push → run → watch → pull → verify → down), platform differences held as data
(`rgt.profiles`), checkpoint-and-resume as a library (`rgt.ckpt`), and teardown refused until
the results are pulled, re-hashed and loaded.

Which code runs where. On the laptop: `cli` (the commands) → `lifecycle` (the verbs: up, run,
watch, pull, down …) → `platforms` (one per control plane: rent, launch, release) → `remote`
(what every platform needs to reach a box from the laptop: its transport, registering it, a
run's layout on it, calling an on-box script and reading its answer) and `transport` (how
bytes and commands get there: this machine, or OpenSSH + rsync). On the box: `onbox`, the
stdlib-only scripts `remote` sends there and runs (the detached runner, the probe, the
manifest and transfer helpers); they never import the rest of rgt. In the training script:
`ckpt`. Below all of them, data: `profiles` (each platform's facts), `spec` (the job), `store`
(the laptop's record), `boxfacts` (what the store keeps about a box, typed).
"""

__version__ = "0.1.0"
