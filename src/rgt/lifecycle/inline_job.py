"""`rgt run BOX -- CMD …`: a job without a spec file (SkyPilot's `sky exec CLUSTER -- CMD`).

The current directory is the workdir (pushed, as a spec's `workdir: .` would be, with its
.rgtignore), the command's words are joined with spaces and run by the box's shell — the rule
`ssh HOST CMD …` follows, so `rgt run b -- 'a && b'` and `rgt ssh b -- 'a && b'` mean the same.
The job is named after the directory, so runs from one project share a job (and its
checkpoint home: `$RGT_CKPT_DIR`). Everything else a spec can say needs a spec.
"""

from __future__ import annotations

import re
from pathlib import Path

from rgt.errors import UserError
from rgt.spec import JobSpec


def inline_spec(words: list[str], cwd: Path | None = None, *,
                outputs: list[str] | None = None) -> JobSpec:
    """The job spec of `rgt run BOX -- WORDS` started in CWD, pulling OUTPUTS (`--output`)."""
    here = (cwd or Path.cwd()).resolve()
    if here == Path.home().resolve() or here == Path(here.anchor):
        # the workdir is pushed whole: a home directory or / is never a project
        raise UserError(f"`rgt run BOX -- CMD` pushes the current directory ({here}) to the "
                        "box: cd into the project's directory first, or write a job spec")
    command = " ".join(words).strip()
    if not command:
        raise UserError("nothing to run after --: `rgt run BOX -- python train.py`")
    from pydantic import ValidationError

    try:
        return JobSpec(name=job_name(here), workdir=here, run=command,
                       outputs=list(outputs or []))
    except ValidationError as err:  # an --output outside the workdir: the spec's own words
        raise UserError(f"--output: {err.errors()[0]['msg'].removeprefix('Value error, ')}"
                        ) from None


def job_name(directory: Path) -> str:
    """The directory's name as a job name (letters, digits, `_.-`; the first one a letter or
    digit), `job` when nothing of it is left."""
    name = re.sub(r"[^A-Za-z0-9_.\-]+", "-", directory.name).lstrip("-_.")
    return name[:40] or "job"
