"""Server-side SVG charts: one mark per point, a readable axis, every label escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from csparql.web.charts import nice_ceiling, time_chart
from csparql.core.windows import parse_instant

SVG = "{http://www.w3.org/2000/svg}"
T0 = parse_instant("2010-03-22T08:00:00Z")


def test_axis_tops_are_round_numbers_at_or_above_the_maximum():
    assert [nice_ceiling(v) for v in (0, 0.3, 1, 7, 12, 230, 999, 1001)] == [1, 0.5, 1, 10, 20, 250, 1000, 2000]


def test_a_line_chart_has_a_dot_per_point_with_its_instant_and_value():
    points = [(T0 + i * 60_000_000, v) for i, v in enumerate([120, 80, 300])]
    svg = ElementTree.fromstring(time_chart(points, title="Evaluation time", unit="ms"))
    dots = svg.findall(f"{SVG}circle")
    assert svg.get("data-points") == "3" and len(dots) == 3
    assert [d.find(f"{SVG}title").text for d in dots] == [
        "2010-03-22T08:00:00Z: 120 ms", "2010-03-22T08:01:00Z: 80 ms", "2010-03-22T08:02:00Z: 300 ms"]
    heights = [float(d.get("cy")) for d in dots]
    assert heights[2] < heights[0] < heights[1]  # higher values are drawn higher (smaller y)


def test_bars_and_an_empty_chart_and_escaped_labels():
    bars = ElementTree.fromstring(time_chart([(T0, 5), (T0 + 3_600_000_000, 0)], title="a <b> & c", unit="rows",
                                             bars=True))
    assert len(bars.findall(f"{SVG}rect")) == 2
    assert bars.get("aria-label") == "a <b> & c"  # escaped in the markup, read back as text
    empty = time_chart([], title="<script>", unit="ms")
    assert "<script>" not in empty and "no data yet" in empty
