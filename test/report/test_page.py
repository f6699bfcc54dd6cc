"""The HTML page says which buffer count is which: the buffer section's (the index when the report was written)
and the learner pipeline's (the learner's own at its last progress row) are labelled as what they are, so the two
numbers of a run whose learner counted a while before the end do not read as one figure that disagrees."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

from test.report.factories import long_run
from user.report.page import render


def _cells(page: str, section: str) -> list[list[str]]:
    """The table cells of one section, as text."""
    body = page.split(f'<section id="{section}">', 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    return [
        [unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)] for r in rows
    ]


def test_the_two_buffer_counts_are_labelled_as_what_they_count(tmp_path: Path) -> None:
    data = long_run(tmp_path)
    page = render(data, {})
    pipeline = {row[0]: row[1] for row in _cells(page, "pipeline") if len(row) == 2}
    label = "transitions received / stored in the buffer at the last progress row (3591 s)"
    assert pipeline[label] == "252567 / 251370"  # progress.csv's last row
    buffer = _cells(page, "buffer")
    (total,) = [row for row in buffer if row[0] == "all"]
    assert int(total[3]) + int(total[4]) == 252_492  # the index
    section = page.split('<section id="buffer">', 1)[1].split("</section>", 1)[0]
    assert "Counted in the buffer&#x27;s index when this report was written" in section
    assert "learner&#x27;s own at its last progress row" in section


def test_the_robots_section_gives_the_intervention_trend(tmp_path: Path) -> None:
    data = long_run(tmp_path)  # online episodes 40..399 with i % 5 intervened steps: 2.0 in both windows
    section = render(data, {}).split('<section id="robots">', 1)[1].split("</section>", 1)[0]
    assert "mean of the first 10 -&gt; the last 10: 2.0 -&gt; 2.0" in section
    overview = {row[0]: row[1] for row in _cells(render(data, {}), "overview") if len(row) == 2}
    assert overview["intervened steps per episode, first -> last 10"] == "2.0 -> 2.0"
