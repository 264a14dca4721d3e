"""The program's entry: `rgt` (pyproject's console script) and `python -m rgt` both start here.

A Ctrl-C must be one line and exit 130 from the first instant of every verb. The CLI's imports
(Typer, Rich, then the verb's module: pydantic, the lifecycle) take a second or more on a slow
laptop, and a SIGINT meeting them would be Python's KeyboardInterrupt traceback, thirty lines of
importlib. So before importing anything of the CLI this installs a handler that says, in one
line, that the verb was stopped before it started, and exits 130 at once: nothing can have been
done yet. `rgt.cli.main` puts Python's own handler back just before the verb runs, so every verb
cleans up after a Ctrl-C as it always has (rgt.lifecycle.interrupt).

What comes before this file is Python's own start-up (site and its .pth files: ~30 ms here); a
SIGINT before the interpreter sets up its handlers ends the process as a shell's Ctrl-C does,
silently, which the shell reports as 130 too.
"""

import os
import signal
import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a Ctrl-C'd command


def _stopped_before_start(signum, frame):
    # Only os.write and os._exit here: the interrupted import may hold locks that print() and
    # the interpreter's normal exit would wait on, and there is nothing to clean up.
    words = [w for w in sys.argv[1:3] if not w.startswith("-")]
    verb = " ".join(["rgt", *words[:2]] if words[:1] == ["ckpt"] else ["rgt", *words[:1]])
    os.write(2, f"error: {verb} stopped (Ctrl-C) before it started; nothing was done\n"
             .encode("utf-8", "replace"))
    os._exit(EXIT_INTERRUPTED)


_stopped_before_start.before_the_verb = True  # rgt.cli.main swaps it for KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGINT, _stopped_before_start)
    from rgt.cli import main as run_cli

    run_cli()


if __name__ == "__main__":
    main()
