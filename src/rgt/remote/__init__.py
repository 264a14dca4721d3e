"""What every platform and every lifecycle verb needs to reach a box, below both.

    reach      a box's transport, its SSH target as JSON, the interpreter found at `up`
    register   `rgt up` for a machine that answers SSH (or this machine): dirs, Python, store
    layout     where one run lives on the box, its checkpoint home, its environment
    calls      run an on-box script and read its JSON; write a file on the box atomically
    runner     start the on-box runner detached (tmux or setsid) and wait for its state
    summary    the flat summary of a run's state that watch, pull and down read

The folders import one way: cli → lifecycle → platforms → (remote, transport, onbox, store,
profiles, spec, ckpt). This package never imports platforms, lifecycle or cli
(tests/test_layering.py holds everyone to that).
"""
