"""The verbs of the lifecycle: up → audit → run → watch → pull → verify → down.

Each verb is platform-agnostic: it reads the box's profile for what differs (paths, detach
primitive, proxy hook, what the meter-stop verb destroys) and reaches the box through a
Transport. Platforms with a control plane plug in through `rgt.platforms`.
"""
