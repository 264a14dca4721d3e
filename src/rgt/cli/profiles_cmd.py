"""Ask the platform data questions: `profiles`, `profile show`, `gotcha`, `compare`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich import box as borders
from rich.panel import Panel
from rich.table import Table
from typer.core import TyperCommand

from rgt.cli import app
from rgt.cli.console import console, escape, print_json
from rgt.errors import UserError
from rgt.profiles import Profile, all_profiles, find_gotcha, load_profile
from rgt.profiles.block import TAIL_LINES, search_lines
from rgt.profiles.paste import reports_trouble
from rgt.profiles.schema import Gotcha, Survives
from rgt.profiles.search import Searcher

# Section name (as the user types it) → the profile fields it renders.
SECTIONS: dict[str, tuple[str, ...]] = {
    "surface": ("surface",),
    "facts": ("facts",),
    "launch": ("launch",),
    "storage": ("storage",),
    "teardown": ("actions",),
    "network": ("network",),
    "spot": ("spot",),
    "daemon": ("daemon",),
    "gotchas": ("gotchas", "universal_refs"),
    "debugging": ("debugging",),
    "overrides": ("overrides", "override_notes"),
    "sources": ("sources",),
}

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
_LINE_SHOWN = 120  # of a paste's matching line, in the table


def _yes_no(value: object) -> str:
    if value is True:
        return "[green]yes[/]"
    if value is False:
        return "[red]no[/]"
    return escape(str(value))


def _print_json(data: object) -> None:
    # Plain print: Rich would wrap long lines and break the JSON for a pipe.
    print(json.dumps(data, indent=2, ensure_ascii=False))


@app.command("profiles")
def profiles_table(as_json: JsonFlag = False) -> None:
    """List every platform profile: what stops the meter, and what that costs you."""
    profiles = all_profiles()
    if as_json:
        print_json("profiles", profiles=[_summary(p) for p in profiles])
        return
    # Fits 80 columns with nothing cut: light borders, the kind under the profile's name,
    # words wrapped at spaces, and "host-dependent" said shorter (`profile show` has it whole).
    table = Table(title="Platform profiles", header_style="bold", box=borders.SIMPLE_HEAD,
                  title_justify="left", show_edge=False, pad_edge=False,
                  collapse_padding=True)
    table.add_column("profile", no_wrap=True)
    table.add_column("meter-stop verb", min_width=20, overflow="fold")
    table.add_column("can't\nundo", min_width=5)
    table.add_column("spot", min_width=8)
    table.add_column("shared\nFS", min_width=8)
    table.add_column("detach", min_width=17, overflow="fold")
    for p in profiles:
        f = p.facts
        table.add_row(
            f"{escape(p.name)}\n[dim]{escape(f.kind)}[/]", escape(f.meter_stop_verb),
            _yes_no(f.meter_stop_irreversible), _short(f.spot_available), _short(f.shared_fs),
            escape(f.detach_primitive))
    console.print(table)
    console.print("Details: [bold]rgt profile show NAME[/]   "
                  "Side by side: [bold]rgt compare A B[/]")


def _short(value: object) -> str:
    return "per host" if value == "host-dependent" else _yes_no(value)


def _summary(p: Profile) -> dict:
    stop = p.meter_stop
    return {
        "name": p.name,
        "title": p.title,
        **p.facts.model_dump(),
        "meter_stop_action": stop.name,
        "meter_stop_keeps_billing": [b.model_dump() for b in stop.keeps_billing],
        "checkpoint_tier": p.storage.checkpoint_tier,
    }


profile_app = typer.Typer(help="One platform profile in full.", no_args_is_help=True)
app.add_typer(profile_app, name="profile")


@profile_app.command("show")
def profile_show(
    name: Annotated[str, typer.Argument(help="Profile name, e.g. lambda, autodl, vastai.")],
    section: Annotated[
        str | None,
        typer.Option("--section", "-s", help=f"Only one part: {', '.join(SECTIONS)}."),
    ] = None,
    long: Annotated[bool, typer.Option(
        "--long", "-l", help="Every part: facts, launch, network, spot, daemon, debugging, "
                             "overrides and sources too.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Show a profile, danger clocks first.

    By default the short form: what to know first, what each teardown action stops, keeps
    and loses, where the data lives, and the platform's gotchas. --long shows every part;
    --section one of them.
    """
    profile = load_profile(name)
    if section is not None and section not in SECTIONS:
        raise UserError(f"unknown section {section!r}; choose one of: {', '.join(SECTIONS)}")
    if as_json:
        data = profile.model_dump(mode="json")
        if section is not None:
            data = {field: data[field] for field in SECTIONS[section]}
        _print_json(data)
        return
    render = _renderers()
    if section or long:
        for part in [section] if section else SECTIONS:
            render[part](profile)
    else:
        for part in SHORT:
            render[part](profile, short=True) if part in ("teardown", "storage") \
                else render[part](profile)
    if not section and not long:
        console.print(f"\nMore: [bold]rgt profile show {escape(name)} --long[/] (facts, launch, "
                      "network, spot, daemon, debugging, overrides, sources), or one part with "
                      "[bold]-s SECTION[/]; a gotcha in full: [bold]rgt gotcha ID[/]")


SHORT = ("surface", "teardown", "storage", "gotchas")  # `profile show` without --long


def _renderers() -> dict:
    return {
        "surface": _render_surface,
        "facts": _render_facts,
        "launch": _render_launch,
        "storage": _render_storage,
        "teardown": _render_teardown,
        "network": _render_network,
        "spot": _render_spot,
        "daemon": _render_daemon,
        "gotchas": _render_gotchas,
        "debugging": _render_debugging,
        "overrides": _render_overrides,
        "sources": _render_sources,
    }


def _gotcha_titles() -> dict[str, str]:
    """Every gotcha id (every platform's and the universal ones) -> its title."""
    from rgt.profiles.loader import all_gotchas

    return {g.id: g.title for _, g in all_gotchas()}


_TITLES: dict[str, str] = {}
_PRINCIPLE = re.compile(r"\s*\(principle \d+\)")  # the design notes' numbering: not the user's
# "…, recorded in seeds/004 §5": where rgt's own research notes say it, not a page to open
_SEEDS_CITED = re.compile(r"[,;]?\s*(?:\w+\s+)?in seeds/\d+(?:\s*\([^)]*\))?(?:\s*§\s*\d+)?")


def said(text: object) -> str:
    """Profile text as markup for the user: each gotcha id named with its title (`AD7` alone
    means nothing to a reader; `AD7 "The platform TensorBoard reads only /root/tf-logs"`
    does), and the design notes' "(principle N)" left out."""
    if not _TITLES:
        _TITLES.update(_gotcha_titles())
        ids = sorted(_TITLES, key=len, reverse=True)
        _TITLES[""] = r"(?<![\w-])(" + "|".join(map(re.escape, ids)) + r")(?![\w-])"
    plain = _SEEDS_CITED.sub("", _PRINCIPLE.sub("", str(text)))
    return escape(re.sub(_TITLES[""], lambda m: f"{m.group(1)} “{_TITLES[m.group(1)]}”", plain))


def _render_surface(p: Profile) -> None:
    lines = [f"[bold]{escape(p.title)}[/] — {said(p.summary)}", ""]
    lines += [f"[bold red]⚠ {said(clock)}[/]" for clock in p.surface.danger_clocks]
    lines += [f"[green]✓[/] {said(c)}" for c in p.surface.conveniences]
    console.print(Panel("\n".join(lines), title=f"{p.name}: read this first", expand=False))


def _kv_table(title: str, rows: list[tuple[str, object]]) -> None:
    """Rows of raw values: booleans become yes/no, text is shown as it is (ids titled)."""
    table = Table(title=title, show_header=False, title_justify="left", title_style="bold")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        if value not in ("", None, [], {}):
            table.add_row(escape(key), _yes_no(value) if isinstance(value, bool) else said(value))
    console.print(table)


def _render_facts(p: Profile) -> None:
    _kv_table("Facts", list(p.facts.model_dump().items()))


def _render_launch(p: Profile) -> None:
    launch = p.launch
    rows: list[tuple[str, object]] = [
        (f"entry ({e.kind})", f"{e.where}  {e.notes}".strip()) for e in launch.entry_points
    ]
    env = launch.env_contract
    rows += [
        ("env", env.summary),
        ("python", env.python),
        ("conda create forbidden", env.conda_create_forbidden),
        ("pip install torch forbidden", env.pip_install_torch_forbidden),
        ("env notes", env.notes),
        ("verify", launch.verify_command),
        ("notes", launch.notes),
    ]
    _kv_table("Launch", rows)


def _survival_cell(value: Survives) -> str:
    return {True: "[green]kept[/]", False: "[bold red]LOST[/]"}.get(value, escape(str(value)))


def _render_storage(p: Profile, short: bool = False) -> None:
    """One entry per tier, not a grid: at 80 columns a column per action cut its name
    ("shut…") and a column per fact left one word a line. SHORT: which action keeps it."""
    console.print("[bold]Storage: does the data survive?[/] (⏻ = the meter-stop verb)")
    for tier in p.storage.tiers:
        home = " [cyan](checkpoints)[/]" if tier.name == p.storage.checkpoint_tier else ""
        console.print(f"[bold]{escape(tier.name)}[/] {escape(tier.path)}{home}")
        survives = [f"{escape(a.name)}{' ⏻' if a.name == p.meter_stop.name else ''} "
                    f"{_survival_cell(tier.survives[a.name])}" for a in p.actions]
        console.print("  " + " · ".join(survives))
        if short:
            continue
        facts = [f"{label} {escape(value)}" for label, value in (
            ("speed", tier.speed), ("cap", tier.cap), ("inodes", tier.inode_cap),
            ("scope", tier.scope), ("billing", tier.billing)) if value]
        if facts:
            console.print("  [dim]" + " · ".join(facts) + "[/]")
        for note in [tier.notes, *(f"{k}: {v}" for k, v in tier.survival_notes.items())]:
            if note:
                console.print(f"  {said(note)}")


def _keeps_billing(action) -> str:
    return "; ".join(
        " ".join(x for x in (b.what, b.rate and f"({b.rate})", b.until and f"until {b.until}") if x)
        for b in action.keeps_billing
    )


def _render_teardown(p: Profile, short: bool = False) -> None:
    """Each action as a short entry: what it stops, whether it can be undone, what keeps
    billing, the data it keeps and loses, and its notes (SHORT: not the notes, the timer or
    how it is done)."""
    console.print("[bold]Teardown and billing: what each action does[/]")
    for a in p.actions:
        console.print(_action_name(p, a))
        if short:
            console.print(f"  stops compute {_yes_no(a.stops_compute_meter)} · irreversible "
                          f"{_yes_no(a.irreversible)} · storage: {_tiers_after(p, a.name)}")
            if a.keeps_billing:
                console.print(f"  [yellow]keeps billing:[/] {said(_keeps_billing(a))}")
            continue
        console.print(f"  stops compute {_yes_no(a.stops_compute_meter)} · stops storage "
                      f"{_yes_no(a.stops_storage_meter)} · irreversible {_yes_no(a.irreversible)}")
        for label, value in (("keeps billing", _keeps_billing(a)), ("timer", _timer(a)),
                             ("how", a.how)):
            if value:
                console.print(f"  {label}: {said(value)}")
        storage = _tiers_after(p, a.name)
        if storage:
            console.print(f"  storage: {storage}")
        if a.notes:
            console.print(f"  notes: {said(a.notes)}")


def _action_name(p: Profile, a) -> str:
    name = a.name + (f" ({', '.join(a.aliases)})" if a.aliases else "")
    return f"[bold]{escape(name)}[/]" + (" ⏻" if a.name == p.meter_stop.name else "")


def _timer(a) -> str:
    return f"{a.timer.after}: {a.timer.effect}" if a.timer else ""


def _tiers_after(p: Profile, action: str) -> str:
    """Which tiers keep their data through the action, and which lose it: the survival matrix
    read by row, so the teardown table answers "what do I lose" without the storage section."""
    kept = [t.name for t in p.storage.tiers if t.survives.get(action) is True]
    lost = [t.name for t in p.storage.tiers if t.survives.get(action) is False]
    other = [f"{t.name}: {t.survives.get(action)}" for t in p.storage.tiers
             if t.survives.get(action) not in (True, False)]
    lines = ([f"[green]keeps[/] {escape(', '.join(kept))}"] if kept else []) + (
        [f"[red]loses[/] {escape(', '.join(lost))}"] if lost else []) + [escape(o) for o in other]
    return "; ".join(lines)


def _render_network(p: Profile) -> None:
    n = p.network
    _kv_table("Network", [
        ("proxy hook", n.proxy_hook or ""),
        *[(f"env {k}", v) for k, v in n.mirror_env.items()],
        ("ssh", ", ".join(n.ssh)),
        ("ports", n.port_exposure),
        ("IP changes on re-create", n.ip_changes_on_recreate),
        ("ports change on re-create", n.ports_change_on_recreate),
        ("egress", n.egress),
        ("notes", n.notes),
    ])


def _render_spot(p: Profile) -> None:
    s = p.spot
    grace = "" if s.grace_seconds is None else f"{s.grace_seconds} s"
    _kv_table("Spot / interruption", [("model", s.model), ("detection", s.detection),
                                      ("grace", grace), ("resume", s.resume_hook),
                                      ("notes", s.notes)])


def _render_daemon(p: Profile) -> None:
    d = p.daemon
    _kv_table("Daemon (detach)", [
        ("primitive", d.primitive), ("fallback", d.fallback or ""),
        ("survives ssh drop", d.survives.ssh_drop),
        ("survives reboot", d.survives.reboot),
        ("survives container restart", d.survives.container_restart),
        ("orchestration", d.native_orchestration), ("notes", d.notes),
    ])


def _render_gotchas(p: Profile) -> None:
    console.print("[bold]Gotchas[/] ([green]✓[/] rgt detects it: `rgt doctor`)")
    width = max((len(g.id) for g in p.gotchas), default=0)
    for g in p.gotchas:
        mark = " [green]✓[/]" if g.detect else ""
        console.print(f"  [bold]{escape(g.id.ljust(width))}[/] {escape(g.title)}{mark}")
    if p.universal_refs:
        titles = _gotcha_titles()
        console.print("Universal gotchas that apply:")
        for ref in p.universal_refs:
            console.print(f"  [bold]{escape(ref)}[/] {escape(titles.get(ref, ''))}")
    console.print("[dim]One in full: rgt gotcha ID[/]")


def _render_debugging(p: Profile) -> None:
    if not p.debugging:
        return
    console.print("[bold]Debugging[/]")
    for d in p.debugging:
        console.print(f"[bold]{said(d.purpose)}[/]\n  run: {escape(d.command)}\n"
                      f"  reading: {said(d.reading)}")


def _render_overrides(p: Profile) -> None:
    _kv_table("Script overrides", list(p.overrides.items()))
    for note in p.override_notes:
        console.print(f"• {said(note)}")


# rgt's own research notes (the design seeds) are how the facts were gathered, not a page a
# user can open: the sources shown are the public ones
_INTERNAL_SOURCE = re.compile(r"^\s*seeds/")


def _render_sources(p: Profile) -> None:
    seen = {(c.doc, c.verified, c.inference) for c in p.sources}
    for part in (p.launch, p.storage, p.network, p.spot, p.daemon, *p.actions, *p.gotchas):
        seen.update((c.doc, c.verified, c.inference) for c in part.sources)
    public = {s for s in seen if not _INTERNAL_SOURCE.match(s[0])}
    if public:
        console.print("[bold]Sources[/] (verified dates: how fresh each fact is)")
        for doc, verified, inferred in sorted(public, key=lambda s: (s[1] or "", s[0])):
            when = "inference" if inferred else verified or "undated"
            console.print(f"  {said(doc)}  [dim]{when}[/]")


class _PasteCommand(TyperCommand):
    """`gotcha search` reads what follows it as pasted text: a word that starts with `-`
    (`-bash: nvidia-smi: command not found`, `--> 12 | x = f()`) is part of the paste, not an
    option, while the command's own options (`--box`, `--file`, `--json`, help) are still read
    wherever they stand. Click would otherwise take `-bash` for `-b -a -s -h`: help."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if args[:1] == ["search"]:
            options, text = _split_paste(self, ctx, args[1:])
            args = [*options, "--", "search", *text]
        return super().parse_args(ctx, args)


def _split_paste(command: TyperCommand, ctx: typer.Context, words: list[str]
                 ) -> tuple[list[str], list[str]]:
    """(the command's own options with their values, every other word) of `words`."""
    options_of = [p for p in command.params if p.param_type_name == "option"]
    valued = {name for p in options_of if not p.is_flag for name in p.opts}
    flags = {name for p in options_of if p.is_flag for name in p.opts}
    flags |= set(ctx.help_option_names)
    options: list[str] = []
    text: list[str] = []
    rest = iter(words)
    for word in rest:
        if word == "--":  # the documented way to say "all of the rest is the paste"
            text.extend(rest)
        elif word in flags or (word.split("=", 1)[0] in valued and "=" in word):
            options.append(word)
        elif word in valued:
            options.append(word)
            value = next(rest, None)
            if value is not None:
                options.append(value)
        else:
            text.append(word)
    return options, text


@app.command("gotcha", cls=_PasteCommand, context_settings={"ignore_unknown_options": True})
def gotcha(
    words: Annotated[list[str], typer.Argument(help="ID (e.g. AD4, U7), or: search TEXT")],
    profile: Annotated[str | None, typer.Option(
        "--profile", help="search: rank this platform's gotchas first (e.g. autodl)")] = None,
    box: Annotated[str | None, typer.Option(
        "--box", help="search: rank the gotchas of this registered box's platform first")] = None,
    log: Annotated[str | None, typer.Option(
        "--file", help="search: a log file (- for stdin) to search line by line, from its "
        f"last {TAIL_LINES} lines")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Explain one gotcha by id, or `rgt gotcha search TEXT` to match a pasted error line or
    block (a word starting with `-` is part of the paste)."""
    if words[0] == "search":
        text = " ".join(words[1:]).strip()
        if log is not None:
            if text:
                raise UserError("give the text or --file, not both: rgt gotcha search --file "
                                "train.log")
            lines, first = _log_tail(log)
            _search(lines, _platform_of(profile, box), as_json, first, log)
            return
        if not text:
            raise UserError("give the error text to search for: rgt gotcha search 'No space left'"
                            " (or --file LOG)")
        _search(text.splitlines() or [text], _platform_of(profile, box), as_json)
        return
    if log is not None:
        raise UserError("--file is for a search: rgt gotcha search --file train.log")
    if profile or box:
        raise UserError("--profile/--box rank a search: rgt gotcha search TEXT --box NAME")
    if len(words) != 1:
        raise UserError("give one gotcha id (e.g. rgt gotcha AD4), or: rgt gotcha search TEXT")
    platform, found = find_gotcha(words[0])
    if as_json:
        _print_json({"platform": platform, **found.model_dump(mode="json")})
        return
    _render_gotcha(platform, found)


def _render_gotcha(platform: str, g: Gotcha) -> None:
    body = [
        f"[bold]Symptom[/]  {escape(g.symptom)}",
        f"[bold]Cause[/]    {escape(g.cause)}",
        f"[bold]Fix[/]      {escape(g.fix)}",
    ]
    if g.detect:
        for pattern in g.detect.patterns:
            body.append(f"[bold]Detect[/]   /{escape(pattern)}/")
        if g.detect.probe:
            body.append(f"[bold]Probe[/]    {escape(g.detect.probe.command)}  "
                        f"→ /{escape(g.detect.probe.matches)}/")
    if g.see_also:
        body.append(f"[bold]See also[/] {escape(', '.join(g.see_also))}")
    if g.sources:
        body.append("[dim]" + escape("; ".join(
            f"{c.doc} ({c.verified})" if c.verified else c.doc for c in g.sources)) + "[/]")
    console.print(Panel("\n".join(body), title=f"{g.id} · {platform} · {escape(g.title)}",
                        title_align="left", expand=False))


def _platform_of(profile: str | None, box: str | None) -> str | None:
    if profile and box:
        raise UserError("give --profile or --box, not both")
    if box:
        from rgt.store import Store  # only a --box search needs the state database

        return Store().box(box).profile
    if profile:
        load_profile(profile)  # an unknown name is one clear line, before any searching
    return profile


def _log_tail(path: str) -> tuple[list[str], int]:
    """The last TAIL_LINES lines of the log at `path` (- for stdin), and the number of the first
    of them in the file."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            text = Path(path).expanduser().read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}; give a readable log "
                        "file") from None
    lines = text.splitlines()
    return lines[-TAIL_LINES:], max(len(lines) - TAIL_LINES, 0) + 1


def _search(lines: list[str], platform: str | None, as_json: bool, first: int = 1,
            source: str | None = None) -> None:
    """Search a pasted line, a pasted block or a log's lines; say which line each hit is on
    (numbered from `first`) when there are several; offer the nearest titles when none fits."""
    searcher = Searcher(platform)
    several = source is not None or sum(1 for line in lines if line.strip()) > 1
    hits = (search_lines(searcher, lines, guesses=source is None) if several
            else searcher.search(lines[0]))
    where = {id(h): h.line_no + first - 1 for h in hits if h.line_no}
    text = "\n".join(lines).strip()
    if as_json:
        _print_json([{"id": h.gotcha.id, "platform": h.platform, "why": h.why,
                      "match": h.match, "title": h.gotcha.title,
                      **({"line_no": where[id(h)], "line": h.line} if id(h) in where else {})}
                     for h in hits])
        if not hits:
            raise typer.Exit(1)
        return
    if not hits:
        console.print("No gotcha matches that text. Try fewer words, or the exact error line.")
        near = searcher.closest(_nearest_line(lines))
        if near:
            console.print("Not a match, but see: " + "; ".join(
                f"[bold]{h.gotcha.id}[/] {escape(h.gotcha.title)}" for h in near))
        raise typer.Exit(1)
    shown = escape(repr(text)) if not several else (
        escape(source) if source and source != "-" else "the pasted lines")
    if hits[0].guess:
        title = f"No rule matched {shown}; gotchas that come close (guesses)"
    elif hits[-1].guess:
        title = f"Gotchas matching {shown}, then close ones (guesses)"
    else:
        title = f"Gotchas matching {shown}"
    if platform:
        title += f" — {escape(platform)} first"
    table = Table(title=title, title_justify="left")
    columns = ("id", "platform", "matched by", "title") + (("line",) if several else ())
    for column in columns:
        table.add_column(column, overflow="fold")
    for h in hits:
        why = f"guess, {h.why}: {h.match}" if h.guess else f"{h.why}: {h.match}"
        row = [h.gotcha.id, h.platform, escape(why), escape(h.gotcha.title)]
        if several:
            row.append(f"{where.get(id(h), '')}: {escape(h.line[:_LINE_SHOWN])}")
        table.add_row(*row)
    console.print(table)
    console.print("Full text: [bold]rgt gotcha ID[/]")


def _nearest_line(lines: list[str]) -> str:
    """The line of a paste to find near titles for: the last one that says something went
    wrong, else the last one."""
    shown = [line for line in lines if line.strip()] or [""]
    return next((line for line in reversed(shown) if reports_trouble(line)), shown[-1])


@app.command("compare")
def compare(
    first: Annotated[str, typer.Argument(help="A profile, e.g. autodl")],
    second: Annotated[str, typer.Argument(help="Another profile, e.g. vastai")],
    as_json: JsonFlag = False,
) -> None:
    """Two platforms side by side: what each action stops, keeps, and keeps billing."""
    a, b = load_profile(first), load_profile(second)
    if as_json:
        print_json("compare", profiles={
            p.name: {"actions": [x.model_dump(mode="json") for x in p.actions],
                     "survival": {t.name: t.survives for t in p.storage.tiers},
                     "checkpoint_tier": p.storage.checkpoint_tier,
                     "meter_stop_verb": p.facts.meter_stop_verb}
            for p in (a, b)})
        return
    table = Table(title=f"{a.name} vs {b.name}: every action", title_justify="left",
                  show_lines=True)
    table.add_column("")
    table.add_column(a.name, overflow="fold")
    table.add_column(b.name, overflow="fold")
    table.add_row("meter-stop verb", _stop_line(a), _stop_line(b))
    table.add_row("checkpoints go to", escape(_home(a)), escape(_home(b)))
    for name in _union([x.name for x in a.actions], [x.name for x in b.actions]):
        table.add_row(escape(name), _action_cell(a, name), _action_cell(b, name))
    console.print(table)


def _union(first: list[str], second: list[str]) -> list[str]:
    return first + [n for n in second if n not in first]


def _home(p: Profile) -> str:
    tier = next(t for t in p.storage.tiers if t.name == p.storage.checkpoint_tier)
    return f"{tier.name} ({tier.path})"


def _stop_line(p: Profile) -> str:
    stop = p.meter_stop
    kind = "[bold red]irreversible[/]" if stop.irreversible else "[green]reversible[/]"
    return f"{escape(p.facts.meter_stop_verb)} — {kind}"


def _action_cell(p: Profile, name: str) -> str:
    action = p.action(name)
    if action is None:
        return "[dim]—[/]"
    lines = [
        "meter: " + ("[green]stops[/]" if action.stops_compute_meter else "[red]keeps running[/]"),
        "storage meter: " + ("stops" if action.stops_storage_meter else "[red]keeps billing[/]"),
    ]
    if action.irreversible:
        lines.append("[bold red]irreversible[/]")
    kept = [t.name for t in p.storage.tiers if t.survives.get(action.name) is True]
    lost = [t.name for t in p.storage.tiers if t.survives.get(action.name) is False]
    if kept:
        lines.append("keeps: " + escape(", ".join(kept)))
    if lost:
        lines.append("[red]loses: " + escape(", ".join(lost)) + "[/]")
    if action.keeps_billing:
        lines.append("[yellow]still billing: " + escape(_keeps_billing(action)) + "[/]")
    if action.timer:
        lines.append(f"[yellow]timer: {escape(action.timer.after)} → "
                     f"{escape(action.timer.effect)}[/]")
    return "; ".join(lines)
