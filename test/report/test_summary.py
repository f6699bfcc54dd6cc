"""report.png laid out so that it can be read: after drawing, no axis label, tick label or key-figure line of one
plot overlaps another's, and none is cut off at the image's edge, even with wide tick labels (large returns and
buffer counts, several robots) beside a plot with a second y axis."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from test.report.factories import long_run
from user.report.plots import DPI
from user.report.summary import summary_figure

pytest.importorskip("matplotlib")


def _shown_texts(fig: Any) -> list[Any]:
    """Every text drawn: the figure's, each plot's axis labels, title and notes, and the tick labels in view."""
    texts = list(fig.texts)
    for ax in fig.axes:
        texts += [ax.xaxis.label, ax.yaxis.label, ax.title, *ax.texts]
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * (high - low)
            texts += [
                label
                for tick in axis.get_major_ticks()
                if low - slack <= tick.get_loc() <= high + slack
                for label in (tick.label1, tick.label2)
            ]
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def test_no_label_of_the_summary_overlaps_another_or_leaves_the_image(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = summary_figure(long_run(tmp_path))
    try:
        fig.set_dpi(DPI)  # as report.png is saved: text sizes against the plots differ a little between resolutions
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _shown_texts(fig)]
        page = fig.bbox
    finally:
        plt.close(fig)
    assert len(boxes) > 50  # the key figures, six plots' labels and their ticks
    overlapping = [
        (a, b)
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
        if min(box_a.x1, box_b.x1) > max(box_a.x0, box_b.x0) and min(box_a.y1, box_b.y1) > max(box_a.y0, box_b.y0)
    ]
    assert overlapping == []
    cut = [t for t, box in boxes if box.x0 < page.x0 or box.y0 < page.y0 or box.x1 > page.x1 or box.y1 > page.y1]
    assert cut == []
