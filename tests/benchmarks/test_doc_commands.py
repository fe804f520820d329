"""Every command the benchmark pages quote names a command that exists (issue 24 item 3).

The measuring scripts became sub-commands of the repository's ``python -m benchmarks`` (issue 35
item 4; they were ``slimvec bench KIND`` before) and were deleted; a page that still cites
``python scripts/bench_ingest.py`` (or a command or option that no longer exists) would send a
reader to nothing. This reads every fenced line and inline code span of BENCHMARKS.md,
docs/benchmarks/*.md, README.md and DEVELOPERS.md, and checks each ``slimvec ...`` /
``python -m slimvec ...`` / ``python -m benchmarks ...`` command resolves (``--help`` through
Typer's CliRunner exits 0, every ``--option`` is one of its options) and each ``python scripts/X``
names a file in scripts/.
No process is started: seconds.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from benchmarks.cli import app as bench_app
from slimvec.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "BENCHMARKS.md", ROOT / "README.md", ROOT / "DEVELOPERS.md",
         *sorted((ROOT / "docs" / "benchmarks").glob("*.md"))]
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
#: a placeholder in prose (`slimvec bench KIND`, `slimvec bench ...`), not a command name
PLACEHOLDER = re.compile(r"^([A-Z][A-Z_]*|\.\.\.)$")
#: scripts/ keeps set-up, test, demo and what the harness cannot do (issue 24 item 3)
MAX_SCRIPTS = 6


def quoted(text: str) -> list[str]:
    """Fenced code lines (continuations joined) and inline code spans of a Markdown page."""
    out, fenced, pending = [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            pending += line.rstrip().removesuffix("\\") + " "
            if not line.rstrip().endswith("\\"):
                out.append(pending.strip())
                pending = ""
        else:
            out += re.findall(r"`([^`\n]+)`", line)
    return out


def commands(snippet: str) -> list[list[str]]:
    """The ``slimvec`` / ``python scripts`` commands in one snippet, as tokens after the program.

    ``["slimvec", ...]``, ``["benchmarks", ...]`` or ``["scripts", "NAME", ...]``; environment assignments, ``nohup`` and
    ``python -m`` are dropped; ``&&``, ``;``, ``|``, redirections and comments end a command.
    """
    try:
        tokens = shlex.split(snippet, comments=True)
    except ValueError:
        tokens = snippet.split()
    out, current = [], []
    for tok in tokens + [";"]:
        if tok in ("&&", ";", "|", "||", "&") or tok.startswith((">", "<", "2>")):
            if current:
                out.append(current)
            current = []
        else:
            current.append(tok)
    found = []
    for cmd in out:
        while cmd and (ENV.match(cmd[0]) or cmd[0] in ("nohup", "time")):
            cmd = cmd[1:]
        if cmd[:3] in (["python", "-m", "slimvec"], ["python3", "-m", "slimvec"]):
            found.append(["slimvec", *cmd[3:]])
        elif cmd[:1] == ["slimvec"]:
            found.append(cmd)
        elif cmd[:3] in (["python", "-m", "benchmarks"], ["python3", "-m", "benchmarks"]):
            found.append(["benchmarks", *cmd[3:]])
        elif cmd[:1] in (["python"], ["python3"], ["bash"]) and len(cmd) > 1 and cmd[1].startswith("scripts/"):
            found.append(["scripts", cmd[1].removeprefix("scripts/"), *cmd[2:]])
    return found


#: program -> its Typer app: the installed CLI and the repository's measurements
APPS = {"slimvec": app, "benchmarks": bench_app}


@functools.cache
def _root_command(program: str = "slimvec") -> typer.main.click.Command:
    return typer.main.get_command(APPS[program])


@functools.cache
def _help_exit_code(path: tuple[str, ...], program: str = "slimvec") -> int:
    return CliRunner().invoke(APPS[program], [*path, "--help"]).exit_code


def resolve(args: list[str], program: str = "slimvec") -> tuple[list[str], typer.main.click.Command] | str:
    """The command path and click command of ``PROGRAM ARGS``, or why it does not exist."""
    group = _root_command(program)
    path: list[str] = []
    cmd = group
    rest = list(args)
    while hasattr(cmd, "commands") and rest and not rest[0].startswith("-") and not PLACEHOLDER.match(rest[0]):
        if rest[0] not in cmd.commands:
            where = " ".join([program, *path])
            return f"`{where}` has no command {rest[0]!r} (has: {', '.join(sorted(cmd.commands))})"
        path.append(rest.pop(0))
        cmd = cmd.commands[path[-1]]
    if cmd is group and not (rest and PLACEHOLDER.match(rest[0])):
        return f"no command after `{program}`"
    if rest and not rest[0].startswith("-") and not PLACEHOLDER.match(rest[0]) and not any(
            getattr(p, "param_type_name", "") == "argument" for p in cmd.params):
        return f"`{program} {' '.join(path)}` takes no argument {rest[0]!r}"
    known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}
    unknown = [t.split("=")[0] for t in rest if t.startswith("--") and t.split("=")[0] not in known]
    if unknown:
        return f"`{program} {' '.join(path)}` has no option {', '.join(unknown)}"
    return path, cmd


def problems(pages: list[Path]) -> list[str]:
    """Every quoted command that names a missing command, option or script."""
    bad = []
    for page in pages:
        for snippet in quoted(page.read_text(encoding="utf-8")):
            for cmd in commands(snippet):
                where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}: `{snippet}`"
                if cmd[0] == "scripts":
                    if not (ROOT / "scripts" / cmd[1]).is_file():
                        bad.append(f"{where}: no scripts/{cmd[1]}")
                    continue
                found = resolve(cmd[1:], cmd[0])
                if isinstance(found, str):
                    bad.append(f"{where}: {found}")
                    continue
                code = _help_exit_code(tuple(found[0]), cmd[0])
                if code != 0:
                    bad.append(f"{where}: `{cmd[0]} {' '.join(found[0])} --help` exited {code}")
    return bad


def test_every_command_quoted_in_the_benchmark_pages_exists():
    bad = problems([p for p in PAGES if p.is_file()])
    assert not bad, "quoted commands that do not exist:\n" + "\n".join(bad)


def test_the_check_finds_a_removed_script_a_missing_command_and_a_stale_option(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Run `python scripts/bench_ingest.py --out x.md` or\n\n```bash\n"
                    "OMP_NUM_THREADS=1 python -m benchmarks ingest-ceiling --stores a,b\n"
                    "python -m benchmarks nonsense --out x\npython -m benchmarks KIND --help\n"
                    "PYTHONPATH=. python -m slimvec bench --suite s.toml\nslimvec bench table sweep r.json\n"
                    "python -m benchmarks table sweep r.json && python scripts/assemble_benchmarks.py\n```\n")
    bad = problems([page])
    assert len(bad) == 4, bad
    assert "no scripts/bench_ingest.py" in bad[0]
    assert "`benchmarks ingest-ceiling` has no option --stores" in bad[1]
    assert "no command 'nonsense'" in bad[2]
    assert "`slimvec bench` takes no argument 'table'" in bad[3]


#: measuring scripts another branch of issue 24 item 3 folds into the harness; take this set out
#: once they are gone from scripts/
def test_scripts_keeps_at_most_six_files():
    """Set-up, test, demo and what the harness truly cannot do; measurements live in `slimvec bench`."""
    kept = sorted(p.name for p in (ROOT / "scripts").iterdir() if p.is_file())
    measuring = [n for n in kept
                 if (n.startswith(("bench_", "measure_", "load_", "scale")) or n.endswith("_table.py"))]
    assert not measuring, f"measuring scripts belong in `python -m benchmarks KIND`: {measuring}"
    assert len(kept) <= MAX_SCRIPTS, kept


@pytest.mark.parametrize("snippet, expected", [
    ("OMP_NUM_THREADS=1 nohup python -m benchmarks pruning --threads 1 > /tmp/p.log 2>&1",
     [["benchmarks", "pruning", "--threads", "1"]]),
    ("python -m slimvec ingest a.jsonl --index i --json", [["slimvec", "ingest", "a.jsonl", "--index", "i", "--json"]]),
    ("cd /work && python scripts/make_scale_data.py --no-glove", [["scripts", "make_scale_data.py", "--no-glove"]]),
    ("slimvec.open(DIR).search(text, k)", []),
])
def test_commands_are_read_out_of_snippets(snippet, expected):
    assert commands(snippet) == expected
