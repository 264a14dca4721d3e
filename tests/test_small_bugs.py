"""Issue 13 item 11, the small ones: --identity with --ssh, --rate inf, smoke --timeout <= 0."""

from __future__ import annotations

from pathlib import Path

from cli import rgt

from rgt.lifecycle.boxes import ssh_target


def test_identity_is_kept_with_ssh():
    target = ssh_target("ssh -p 2222 root@example.com", None, None, None, "/keys/id_x")
    assert target.identity == Path("/keys/id_x") and target.port == 2222


def test_rate_and_timeouts_must_be_real_numbers(tmp_path):
    env = {"RGT_HOME": str(tmp_path / "home")}
    for bad in ("inf", "nan"):
        result = rgt("up", "b", "--rate", bad, env=env)
        assert result.returncode == 2 and "--rate" in result.stderr, result.stderr
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\nworkdir: .\nrun: 'true'\nsmoke: 'true'\n")
    for bad in ("0", "-1", "inf"):
        result = rgt("smoke", str(spec), "--timeout", bad, env=env)
        assert result.returncode == 2 and "--timeout" in result.stderr, (bad, result.stderr)


def test_spec_typos_and_yaml_errors_point_at_the_fix(tmp_path):
    from rgt.errors import UserError
    from rgt.spec import load_spec

    typo = tmp_path / "typo.yaml"
    typo.write_text("name: j\nworkdir: .\nrun: 'true'\noutptus: [out]\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: j\nrun: 'true'\nenv: {A: 1\n")
    for path, expected in ((typo, "did you mean `outputs`?"), (broken, f"{broken}:4:1:")):
        try:
            load_spec(path)
        except UserError as err:
            assert expected in str(err), str(err)
        else:
            raise AssertionError(f"{path} loaded")
