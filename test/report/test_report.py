"""`user report RUN_DIR` on a short real run: `user bringup` of a learner, a rollout and two simulated arms (one
with a scripted "human" that intervenes), ended by the learner's `stop_after`. The report is written through the
command's module in a fresh interpreter; the HTML parses, holds every section and no external reference, its
tables agree with the run's own files, and headless Chromium renders it to a screenshot that is not blank (kept
under test-artifacts/ with the report)."""

from __future__ import annotations

import base64
import csv
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import cv2
import numpy as np
import pytest

from test.conftest import ENV_REQUIRE_ROS, REPO, free_port, user_cmd
from test.report.factories import SECTIONS
from user.buffer.replay import ReplayBuffer

pytest.importorskip("mujoco")
pytestmark = pytest.mark.timeout(300)

ARTIFACTS = REPO / "test-artifacts"
RUN_S = 150.0  # deadline for the run to end by itself (about 20 s on an idle 2-core machine)
CHROMIUM_S = 120.0
HELP = "write a self-contained HTML report and a PNG summary of a run directory"
VOID = {"meta", "img", "br", "hr", "link", "input", "col", "source", "wbr", "area", "base", "embed", "track"}
# `python -c` runner: the `report` command's own parser and function, as `user report` will run them
RUNNER = """
import argparse, logging, sys
from user.cli import report_cmd
logging.basicConfig(level=logging.INFO)
parser = argparse.ArgumentParser(prog="user")
report_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(["report", *sys.argv[1:]])
sys.exit(args.func(args))
"""


def _deployment(tmp_path: Path) -> Path:
    learning = "{mlp: {state_dim: 17, action_dim: 7, hidden: [32]}, rlpd: {num_critics: 2, critic_hidden: [32], " \
               "batch_size: 32, utd_ratio: 1}}"  # fmt: skip
    arm = "kind: robot\n    params: {{robot_id: {0}, task: peg_insertion, realtime: false, privileged_state: true, " \
          "max_steps: 15, seed: {1}, wait_for_consumer_s: 60.0}}"  # fmt: skip
    path = tmp_path / "report_run.yaml"
    path.write_text(
        f"""name: report_run
router: {{endpoints: [tcp/127.0.0.1:{free_port()}], start: auto}}
nodes:
  - name: learner
    kind: learner
    shutdown_timeout_s: 30.0
    params:
      robots: [arm_a, arm_b]
      run_dir: "{{run_dir}}"
      learning: {learning}
      pacing: {{min_transitions: 32, publish_every: 5}}
      stats_period_s: 0.25
      torch_threads: 1
      stop_after: {{episodes: 12}}
  - name: rollout
    kind: rollout
    params: {{robots: [arm_a, arm_b], learning: {learning}, start_episode: 1}}
  - {{name: expert_a, kind: expert, params: {{robot_id: arm_a, task: peg_insertion, until_episode: 1}}}}
  - {{name: expert_b, kind: expert, params: {{robot_id: arm_b, task: peg_insertion, until_episode: 1}}}}
  - {{name: helper_b, kind: expert, params: {{robot_id: arm_b, task: peg_insertion, role: human, steps: [4, 5, 6]}}}}
  - name: arm_a
    {arm.format("arm_a", 0)}
  - name: arm_b
    {arm.format("arm_b", 100)}
"""
    )
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A short real run, ended by the learner's stop_after (bringup exits 0 by itself)."""
    tmp = tmp_path_factory.mktemp("report_run")
    run = tmp / "run"
    with open(tmp / "bringup.out", "wb") as out:
        proc = subprocess.Popen(user_cmd("bringup", str(_deployment(tmp)), "--run-dir", str(run)), stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
        try:
            code = proc.wait(RUN_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
    assert code == 0, (tmp / "bringup.out").read_text()
    yield run


class Page(HTMLParser):
    """Tags kept balanced, section ids, table rows per section, every URL-bearing attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.sections: list[str] = []
        self.rows: dict[str, list[list[str]]] = {}
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        attributes = dict(attrs)
        if tag == "section":
            self.sections.append(attributes.get("id") or "")
        if tag == "tr" and self.sections:
            self.rows.setdefault(self.sections[-1], []).append([])
        if tag in ("td", "th"):
            self._cell = []
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "action", "srcset", "poster", "data")]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(f"</{tag}> does not close the open element")
        if tag in ("td", "th") and self._cell is not None and self.sections:
            self.rows[self.sections[-1]][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _episodes(run: Path) -> list[dict[str, str]]:
    with open(run / "episodes.csv", newline="") as f:
        return list(csv.DictReader(f))


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "no chromium (scripts/install --ros installs Debian's `chromium`)"
        if os.environ.get(ENV_REQUIRE_ROS) == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_the_report_command_has_its_help_line() -> None:
    import argparse

    from user.cli import report_cmd

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    report_cmd.add_parser(sub)
    assert [a.help for a in sub._choices_actions] == [HELP]
    args = parser.parse_args(["report", "somewhere"])
    assert args.run_dir == Path("somewhere") and args.out is None and args.func is report_cmd.run


def test_a_directory_that_is_not_a_run_is_refused_by_the_command(tmp_path: Path) -> None:
    proc = _report(str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert f"{tmp_path}: not a run directory: expected at least one of deployment.yaml" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "report.html").exists()


def test_report_of_a_real_run_is_self_contained_complete_and_renders(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "site" / "run_report.html"
    proc = _report(str(run_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and f"report:  {out}" in proc.stdout
    summary = out.with_suffix(".png")
    assert summary.is_file() and not (run_dir / "report.html").exists()
    text = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    page.close()
    assert page.errors == [] and page.stack == []
    assert page.sections == list(SECTIONS)
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}  # nothing fetched or run
    assert "http:" not in text and "https:" not in text and "url(" not in text and "@import" not in text
    images = [u for u in page.urls if u.startswith("data:image/png;base64,")]
    assert images == page.urls and len(images) == 4  # curves, robots, timing, buffer: all inline
    for url in images:
        decoded = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
        assert decoded is not None and decoded.shape[0] > 100 and decoded.shape[1] > 100
    _check_tables(page, run_dir)
    _render(text, out, summary)


def _check_tables(page: Page, run: Path) -> None:
    """The per-robot and buffer tables agree with episodes.csv and the buffer's index, counted here."""
    episodes = _episodes(run)
    robots = {row[0]: row for row in page.rows["robots"][1:]}
    assert sorted(robots) == ["arm_a", "arm_b"]
    for robot, row in robots.items():
        mine = [e for e in episodes if e["robot_id"] == robot and e["is_demo"] == "0"]
        assert int(row[2]) == len(mine) > 0
        assert int(row[5]) == sum(int(e["interventions"]) for e in mine)
    assert int(robots["arm_b"][5]) > 0 and int(robots["arm_a"][5]) == 0  # only arm_b has a "human"
    with ReplayBuffer.open(run / "buffer", read_only=True) as buf:
        counts = dict(buf.storage.index.fetchall("SELECT robot_id, COUNT(*) FROM transitions GROUP BY robot_id"))
    buffer = {row[0]: row for row in page.rows["buffer"][1:] if row[0] in counts}
    assert {r: int(row[3]) + int(row[4]) for r, row in buffer.items()} == counts
    nodes = {row[0]: row[1] for row in page.rows["nodes"][1:]}
    assert nodes["learner"] == "complete"
    others = ("rollout", "expert_a", "expert_b", "helper_b", "arm_a", "arm_b")  # stopped by bringup, cleanly
    assert {nodes.get(name) for name in others} == {"stopped"}, nodes


def _render(text: str, html: Path, summary: Path) -> None:
    """Headless Chromium's screenshot of the page: not blank, with the plots' colours in it; kept as artifacts."""
    shot = html.with_name("screenshot.png")
    proc = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={html.parent / 'profile'}",
         f"--screenshot={shot}", "--window-size=1280,2400", html.as_uri()],
        capture_output=True, text=True, timeout=CHROMIUM_S,
    )  # fmt: skip
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-3000:]
    ARTIFACTS.mkdir(exist_ok=True)
    for path in (shot, html, summary):
        shutil.copyfile(path, ARTIFACTS / f"report_{path.name}")
    for png in (shot, summary):
        _not_blank(png)


def _not_blank(path: Path) -> None:
    """Enough non-white pixels, and several saturated colours (the plots' lines and bars, not only text)."""
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert image is not None, path
    non_white = np.count_nonzero(image.min(axis=2) < 240) / (image.shape[0] * image.shape[1])
    assert non_white > 0.02, f"{path}: {non_white:.1%} non-white"
    hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
    saturated = hsv[(hsv[..., 1] > 120) & (hsv[..., 2] > 80)]
    hues = {int(h) // 10 for h in saturated[:, 0]}  # 18 hue bins
    assert len(saturated) > 1000 and len(hues) >= 3, f"{path}: {len(saturated)} coloured pixels, hue bins {hues}"
