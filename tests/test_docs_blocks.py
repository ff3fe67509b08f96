"""Every fenced shell and Python block of the README and the documentation pages runs, so a
removed or renamed spelling in the pages fails here, not in a reader's shell.

How a page runs (one test per page, named after it):

- One temporary working directory per page; its blocks run in page order, so a later
  command sees what an earlier one wrote (a dataset, a run, a report).
- Shell blocks (``bash``, ``sh``, ``shell``, ``console``): continuation lines are joined,
  comments cut, ``&&`` splits a line. Each ``finpod …`` command runs through the real CLI
  entry point, in this process, after the substitutions of :data:`SUBSTITUTIONS`; it must
  exit 0. ``VAR=$(finpod …)`` captures the command's stdout (its one path) and ``$VAR``
  or ``"$VAR"`` reads it back. A line whose program is in :data:`NOT_RUN` (installers,
  git, Ray and Kubernetes tools, servers) is skipped; any other program fails the test.
- Python blocks (``python``): a page's blocks run in order in one namespace (``exec``),
  in the page's directory, after :data:`PYTHON_SUBSTITUTIONS`.
- Markers, an HTML comment on the line just above a fence:
  ``<!-- docs-test: skip (why) -->`` skips the block (a reason is required; skips are
  counted by :data:`MAX_SKIPPED_BLOCKS`), ``<!-- docs-test: error (why) -->`` expects each
  of its finpod commands to exit non-zero.
- A ``DeprecationWarning``/``FutureWarning`` raised from finpod's code, or a line saying
  "deprecated" on a command's stderr, fails the block.

Time: one small sample dataset, one in-process Ray and tiny strategies serve every page,
and a command already run in this session with the same text (after substitution) is not
run again: what it wrote (a dataset, a run, a report) is copied into the page's directory.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import time
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "deploy/README.md",
    REPO / "notebooks/README.md",
]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
PYTHON_LANGS = {"python", "py"}
#: Blocks that may carry a skip marker, all pages together: skips stay few.
MAX_SKIPPED_BLOCKS = 6

#: Programs the pages name that are not run here, and why.
NOT_RUN = {
    "python3": "creates the virtualenv this test runs in",
    ".venv/bin/pip": "installs the package this test imports",
    "pip": "installs packages",
    ".venv/bin/python": "runs the test suite (this test is part of it)",
    ".venv/bin/jupyter": "the notebooks run in tests/test_notebooks.py",
    "jupyter": "the notebooks run in tests/test_notebooks.py",
    "git": "version control",
    "cd": "the page's directory is the working directory",
    "export": "credentials of a service",
    "ray": "starts a Ray cluster: the in-process Ray of this test stands for it",
    "kubectl": "needs a Kubernetes cluster",
    "podman": "builds a container image",
    "docker": "builds a container image",
    "tensorboard": "a server that runs until stopped",
    "mkdocs": "the site is built in tests/test_docs_site.py",
    "deploy/lock-constraints.sh": "rewrites constraints.txt",
}

#: The tickers of the small sample every page trains on (the shipped sample has 95).
TINY_TICKERS = "AAPL,MSFT,AMZN,NVDA,ADBE,CSCO,INTC,PEP"
#: A tournament's budget here: two pods of :data:`TINY_TOURNAMENT` ``pod_steps``.
TINY_BUDGET = "2 pods"
#: Env steps of a single agent (``--steps``, ``total_steps``, ``num_steps``).
TINY_STEPS = 256

#: The substitutions applied to a ``finpod …`` command, in this order (each documented
#: where it is applied, in :func:`tiny_command`):
SUBSTITUTIONS = (
    "/opt/finpod/PATH → PATH (the container's working directory is the page's; it holds "
    "data/datasets/sample, as the image does)",
    "[--option value] → --option value (an optional part is run)",
    "<run-id> → the newest run directory the page made",
    '$VAR, "$VAR" → the stdout of an earlier VAR=$(finpod …)',
    "-s/--strategy strategies/X.toml → a copy of X.toml with tiny nets, envs, steps and budget",
    "finpod run without --strategy → --strategy <tiny quickstart.toml>",
    "finpod run without --data → --data <the session's small sample dataset>",
    f"finpod download --source sample → adds --tickers {TINY_TICKERS}",
    f"--budget B → --budget '{TINY_BUDGET}'",
    f"--steps N → --steps {TINY_STEPS}",
    "--folds N → --folds 1, --seeds N → --seeds 1, finpod walkforward → adds --no-ray",
    "--address A → left out (the session's in-process Ray stands for the cluster)",
    "--source yfinance / alpaca → fails unless the block is marked skip (needs network)",
)
#: Text substitutions applied to a Python block before it runs.
PYTHON_SUBSTITUTIONS = (
    ('"strategies/X.toml"', "the tiny copy's path"),
    ('budget="…"', f'budget="{TINY_BUDGET}"'),
    ("total_steps=N, num_steps=N", f"{TINY_STEPS}"),
    ("steps_per_segment=N", f"{TINY_STEPS // 2}"),
)

#: Strategy keys shrunk wherever they appear (agent, env, search tables).
TINY_KEYS = {
    "horizon": 16,
    "minibatch_size": 32,
    "update_epochs": 1,
    "actor_hidden": [8],
    "critic_hidden": [8],
    "buffer_size": 2048,
    "learning_starts": 64,
    "batch_size": 32,
    "gradient_steps": 1,
    "episode_length": 40,
}
TINY_TRAIN = {"num_envs": 4, "total_steps": TINY_STEPS, "eval_every": TINY_STEPS, "device": "cpu"}
TINY_TOURNAMENT = {
    "pod_steps": TINY_STEPS,
    "epochs": 1,
    "fresh_pods": 2,
    "budget": TINY_BUDGET,
    "population": 1,
}
NETWORK_SOURCES = {"yfinance", "alpaca"}

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!--\s*docs-test:\s*(skip|error)\s*\(([^)]+)\)\s*-->")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    skip: str | None = None
    """Why the block is not run (its skip marker), or None."""
    error: str | None = None
    """Why its commands must fail (its error marker), or None."""

    @property
    def where(self) -> str:
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page.name
        return f"{page}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    """The fenced shell and Python blocks of ``page``, with the marker above each."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        lang = match.group(1).lower()
        if lang not in SHELL_LANGS | PYTHON_LANGS:
            continue
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _MARKER.search(before)
        block = Block(page, text[: match.start()].count("\n") + 1, lang, match.group(2))
        if marker and marker.group(1) == "skip":
            block.skip = marker.group(2).strip()
        elif marker:
            block.error = marker.group(2).strip()
        blocks.append(block)
    return blocks


def shell_lines(text: str) -> list[str]:
    """The commands of a shell block: continuations joined, comments cut, ``&&`` split."""
    joined = re.sub(r"\\\n\s*", " ", text)
    commands = []
    for line in joined.splitlines():
        for part in _cut_comment(line).split("&&"):
            if part.strip():
                commands.append(part.strip())
    return commands


def _cut_comment(line: str) -> str:
    """``line`` without its trailing ``# comment`` (a ``#`` outside quotes after a blank)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


# ----------------------------------------------------------------------------------------
# Tiny strategies


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML value for {value!r}")


def _toml(table: dict, prefix: str = "") -> list[str]:
    """``table`` as TOML lines: plain values (range tables inline), then sub-tables."""
    lines = []
    subtables = {}
    for key, value in table.items():
        if isinstance(value, dict) and not {"low", "high"} & set(value):
            subtables[key] = value
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in subtables.items():
        lines.append(f"[{prefix}{key}]")
        lines += _toml(value, f"{prefix}{key}.")
    return lines


def _shrink(table: dict, keys: dict) -> None:
    for key, value in table.items():
        if isinstance(value, dict) and not {"low", "high"} & set(value):
            _shrink(value, keys)
        elif key in keys:
            tiny = keys[key]
            choice = isinstance(value, list) and not isinstance(tiny, list)
            table[key] = [tiny] if choice else tiny


def tiny_strategy(source: Path, out: Path) -> Path:
    """A copy of strategy ``source`` at ``out`` with the sizes of :data:`TINY_KEYS`,
    :data:`TINY_TRAIN` and :data:`TINY_TOURNAMENT` (algorithms, env and search unchanged)."""
    data = tomllib.loads(source.read_text(encoding="utf-8"))
    for name in ("agent", "env", "search"):
        _shrink(data.get(name, {}), TINY_KEYS)
    data.setdefault("train", {}).update(TINY_TRAIN)
    if "tournament" in data:
        data["tournament"].update(TINY_TOURNAMENT)
        data["tournament"].pop("time_cap", None)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(_toml(data)) + "\n", encoding="utf-8")
    return out


# ----------------------------------------------------------------------------------------
# The session: small dataset, tiny strategies, Ray, and commands already run


@dataclass
class Session:
    root: Path
    dataset: Path
    done: dict[str, tuple[str, Path, list[str]]] = field(default_factory=dict)
    """command text → (stdout, the directory it ran in, the paths it created there)."""

    def strategy(self, name: str) -> str:
        source = REPO / name
        if not source.is_file():
            return name  # the CLI says what is wrong with it
        out = self.root / "strategies" / source.name
        if not out.is_file():
            tiny_strategy(source, out)
        return str(out)


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    """The small sample dataset, a private in-process Ray (2 CPUs) that every tournament
    of every page uses, and the record of the commands already run."""
    import ray

    from finpod.data import build_dataset

    root = tmp_path_factory.mktemp("docs-blocks")
    dataset = build_dataset("sample", root / "sample", tickers=TINY_TICKERS.split(","))
    ray_tmp = Path(f"/tmp/rfd_{secrets.token_hex(3)}")
    ray_tmp.mkdir()
    old = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(ray_tmp)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(ray_tmp / "r"),
    )
    yield Session(root, Path(dataset))
    ray.shutdown()
    if old is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = old
    shutil.rmtree(ray_tmp, ignore_errors=True)


# ----------------------------------------------------------------------------------------
# Running a page


@dataclass
class Page:
    dir: Path
    session: Session
    variables: dict[str, str] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    """Run directories the page made, oldest first."""
    not_run: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    """Seconds of each finpod command, and whether it was copied."""

    def newest_run(self) -> str:
        if not self.runs:
            raise AssertionError("<run-id> before any run was made on the page")
        return Path(self.runs[-1]).name


def _option(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            return args[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def tiny_command(command: str, page: Page) -> list[str]:
    """The arguments ``finpod`` gets for ``command`` after :data:`SUBSTITUTIONS`."""
    text = re.sub(r"\$\{?(\w+)\}?", lambda m: page.variables.get(m.group(1), m.group(0)), command)
    if "/opt/finpod/" in text and not (page.dir / "data/datasets/sample").exists():
        # The container image's working directory, where its build put the sample dataset.
        shutil.copytree(page.session.dataset, page.dir / "data/datasets/sample")
    text = text.replace("/opt/finpod/", "").replace("[", "").replace("]", "")
    if "<run-id>" in text:
        text = text.replace("<run-id>", page.newest_run())
    words = shlex.split(text)
    verb, rest = words[1], words[2:]
    args: list[str] = [verb]
    i = 0
    while i < len(rest):
        word = rest[i]
        value = rest[i + 1] if i + 1 < len(rest) else None
        if word in ("-s", "--strategy") and value is not None:
            args += [word, page.session.strategy(value)]
        elif word == "--budget" and value is not None:
            args += [word, TINY_BUDGET]
        elif word == "--steps" and value is not None:
            args += [word, str(TINY_STEPS)]
        elif word in ("--folds", "--seeds") and value is not None:
            args += [word, "1"]
        elif word == "--address" and value is not None:
            pass  # the session's in-process Ray stands for the cluster
        elif word == "--source" and value in NETWORK_SOURCES:
            raise AssertionError(
                f"--source {value} needs the network: mark the block "
                "<!-- docs-test: skip (needs network) -->"
            )
        else:
            args.append(word)
            i += 1
            continue
        i += 2
    if verb == "run":
        if _option(args, "-s", "--strategy") is None:
            args += ["--strategy", page.session.strategy("strategies/quickstart.toml")]
        if _option(args, "-d", "--data") is None:
            args += ["--data", str(page.session.dataset)]
    sample = (_option(args, "--source") or "sample") == "sample"
    if verb == "download" and sample and _option(args, "--tickers") is None:
        args += ["--tickers", TINY_TICKERS]
    if verb == "walkforward" and "--ray" not in args:
        args.append("--no-ray")
    return args


def _tree(root: Path) -> set[str]:
    """Paths under ``root`` up to three levels deep (runs/<id>, data/datasets/<name>)."""
    found = set()
    for depth in ("*", "*/*", "*/*/*"):
        found |= {str(p.relative_to(root)) for p in root.glob(depth)}
    return found


def _created(before: set[str], after: set[str]) -> list[str]:
    """The new paths of ``after``, without those inside another new path."""
    new = sorted(after - before)
    return [p for p in new if not any(p.startswith(q + "/") for q in new if q != p)]


def _deprecations(caught: list[warnings.WarningMessage], stderr: str) -> list[str]:
    found = [
        f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})"
        for w in caught
        if issubclass(w.category, DeprecationWarning | FutureWarning)
        and (str(REPO / "finpod") in str(w.filename) or "finpod" in str(w.message))
    ]
    found += [line for line in stderr.splitlines() if re.search(r"deprecat", line, re.I)]
    return found


def run_command(command: str, block: Block, page: Page, cli: Callable) -> str:
    """Run one ``finpod …`` command of ``block`` in the page's directory; its stdout."""
    capture = re.match(r"^(\w+)=\$\((.*)\)$", command)
    text = capture.group(2) if capture else command
    words = shlex.split(text)
    program = words[0]
    if not re.match(r"^(\S*/)?finpod$", program):
        if program in NOT_RUN:
            page.not_run.append(f"{block.where}: {program} ({NOT_RUN[program]})")
            return ""
        raise AssertionError(
            f"{block.where}: `{command}` runs {program!r}, which this test does not know: "
            "add it to NOT_RUN with a reason, or mark the block"
        )
    args = tiny_command(text, page)
    key = shlex.join(args)
    before = _tree(page.dir)
    t0, copied = time.perf_counter(), key in page.session.done
    if copied:
        stdout, source, made = page.session.done[key]
        for rel in made:
            target = page.dir / rel
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                (shutil.copytree if (source / rel).is_dir() else shutil.copy2)(source / rel, target)
        out_text, err, code, caught = stdout, "", 0, []
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            done = cli(*args, cwd=page.dir)
        out_text, err, code = done.stdout, done.stderr, done.returncode
    shown = f"{block.where}: `{command}` (run as `finpod {key}`)"
    if block.error:
        assert code != 0, f"{shown} was expected to fail ({block.error})"
        return out_text
    assert code == 0, f"{shown} exited {code}:\n{err[-3000:]}"
    assert not _deprecations(caught, err), f"{shown}: {_deprecations(caught, err)}"
    made = _created(before, _tree(page.dir))
    if key not in page.session.done and made:
        page.session.done[key] = (out_text, page.dir, made)
    page.runs += [p for p in sorted(_tree(page.dir) - before) if re.fullmatch(r"runs/[^/]+", p)]
    page.log.append(
        f"{time.perf_counter() - t0:6.1f} s {'(copied) ' if copied else ''}finpod {key}"
    )
    if capture:
        page.variables[capture.group(1)] = out_text.strip()
    return out_text


def python_text(text: str, session: Session) -> str:
    """``text`` after :data:`PYTHON_SUBSTITUTIONS`."""
    text = re.sub(
        r"([\"'])(strategies/\w+\.toml)\1", lambda m: repr(session.strategy(m.group(2))), text
    )
    text = re.sub(r"budget=([\"'])[^\"']*\1", f'budget="{TINY_BUDGET}"', text)
    text = re.sub(r"\b(total_steps|num_steps)=[\d_]+", rf"\1={TINY_STEPS}", text)
    return re.sub(r"\bsteps_per_segment=[\d_]+", f"steps_per_segment={TINY_STEPS // 2}", text)


def run_page(page_path: Path, session: Session, cli: Callable, workdir: Path) -> Page:
    page = Page(workdir, session)
    namespace: dict = {"__name__": "__docs__"}
    for block in page_blocks(page_path):
        if block.skip:
            continue
        if block.lang in SHELL_LANGS:
            for command in shell_lines(block.text):
                run_command(command, block, page, cli)
        else:
            code = compile(python_text(block.text, session), block.where, "exec")
            cwd = Path.cwd()
            os.chdir(workdir)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    exec(code, namespace)
            except Exception as exc:
                raise AssertionError(f"{block.where}: the Python block failed: {exc!r}") from exc
            finally:
                os.chdir(cwd)
            assert not _deprecations(caught, ""), f"{block.where}: {_deprecations(caught, '')}"
    return page


def _page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_skip_markers_are_few_and_say_why():
    skipped = [b for page in PAGES for b in page_blocks(page) if b.skip]
    assert len(skipped) <= MAX_SKIPPED_BLOCKS, [b.where for b in skipped]
    assert all(len(b.skip) >= 8 for b in skipped), [(b.where, b.skip) for b in skipped]


def test_the_tiny_strategies_keep_the_algorithms_and_shrink_the_sizes(tmp_path):
    for source in sorted((REPO / "strategies").glob("*.toml")):
        original = tomllib.loads(source.read_text(encoding="utf-8"))
        tiny = tomllib.loads(tiny_strategy(source, tmp_path / source.name).read_text())
        assert tiny["agent"] == {**original["agent"], "hparams": tiny["agent"]["hparams"]}
        assert tiny["train"]["total_steps"] == TINY_STEPS
        if "tournament" in original:
            assert tiny["tournament"]["budget"] == TINY_BUDGET
            assert tiny["search"].keys() == original["search"].keys()


def test_a_stale_spelling_on_a_page_fails_with_its_line(tmp_path, finpod_cli):
    """A block with a removed option names the page, the line and the command."""
    page = tmp_path / "stale.md"
    page.write_text("# stale\n\n```bash\nfinpod backtest runs/x --out reports\n```\n")
    session = Session(tmp_path / "s", tmp_path / "none")
    with pytest.raises(AssertionError, match=r"stale\.md:3: `finpod backtest runs/x --out"):
        run_page(page, session, finpod_cli, tmp_path)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page_path", PAGES, ids=_page_id)
def test_every_block_of_the_page_runs(page_path, session, finpod_cli, tmp_path, capsys):
    page = run_page(page_path, session, finpod_cli, tmp_path)
    with capsys.disabled():
        if os.environ.get("FINPOD_DOCS_TIMES"):  # FINPOD_DOCS_TIMES=1: each command's time
            print("", *page.log, *page.not_run, sep="\n  ")
