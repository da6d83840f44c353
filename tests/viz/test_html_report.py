"""sr-dist-report on a real run: one self-contained page (plots as data: URIs, formulas as
MathML, every text escaped), opened in headless Chromium: no console or page error, no network
request, the formulas laid out, the screenshot not blank."""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from sr_dist.report_cli import main as report_main
from sr_dist.results import CandidateWriter, RunRecord, write_run
from sr_dist.viz import PLOT_KINDS, load_run
from tests.results.results_helpers import T0, rows_for
from tests.viz.viz_run import VizRun

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

CHROMIUM = Path("/usr/bin/chromium")
#: No sandbox (root in a container), no GPU, and none of Chromium's own background traffic.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


class _Tags(HTMLParser):
    """The start tags of a page with their attributes, and whether it parsed cleanly."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser.tags


@pytest.fixture(scope="module")
def report(viz_run: VizRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert report_main([str(viz_run.path), "--run", viz_run.run_id, "-o", str(out)]) == 0
    return out


def test_the_page_holds_the_run_and_loads_nothing(report: Path, viz_run: VizRun) -> None:
    page = report.read_text(encoding="utf-8")
    tags = _tags(page)
    names = [t for t, _ in tags]
    assert "script" not in names and "link" not in names and "iframe" not in names
    images = [a for t, a in tags if t == "img"]
    assert len(images) == len(PLOT_KINDS)
    assert all((a.get("src") or "").startswith("data:image/png;base64,") for a in images)
    # Nothing that could be fetched: every src/href is inline data or a fragment.
    for tag, attrs in tags:
        for key in ("src", "href", "action", "data"):
            value = attrs.get(key)
            assert value is None or value.startswith(("data:", "#")), (tag, key, value)
    assert not re.search(r"url\(", page), "a CSS url() would be a request"
    csp = [a for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(csp) == 1 and "default-src 'none'" in (csp[0]["content"] or "")
    # The run's configuration, its front (one row per formula, each as MathML), the stats.
    view = load_run(viz_run.path, viz_run.run_id)
    assert view.record is not None and view.record.config
    assert "dataset:\n  source: feynman:I.6.2" in page
    rows = re.findall(r"<tr[^>]*>", page.split('id="pareto"', 1)[1].split("</table>", 1)[0])
    assert len(rows) == len(view.front) + 1  # and the header
    assert page.count("<math") == len(view.front)
    assert 'class="selected"' in page
    assert 'id="agents"' in page and 'id="evaluator"' in page
    for agent in (0, 1):
        assert f"<tr><td class=\"num\">{agent}</td>" in page.split('id="agents"', 1)[1]


def test_text_from_the_results_is_escaped(tmp_path: Path) -> None:
    """A hostile config, error and expression come out as text, never as markup."""
    root = tmp_path / "results"
    rows = rows_for("evil", 2, complexity=3)
    rows[1] = {**rows[1], "expression": "c0*x1<script>alert(1)</script>", "complexity": 5,
               "val_nmse": 0.01, "created_at": T0 + timedelta(seconds=9)}
    with CandidateWriter(root, "evil", "feynman:I.6.2", "evolve", background=False) as writer:
        writer.add(rows)
    write_run(root, RunRecord(
        run_id="evil", dataset="feynman:I.6.2", model="evolve", started_at=T0, agents=1,
        config="dataset:\n  source: '</pre><script>alert(2)</script>'\n",
    ).with_best(rows[1], 2).finished("failed", "error",
                                     error="<img src=x onerror=alert(3)>"))
    out = tmp_path / "evil.html"
    assert report_main([str(root), "-o", str(out)]) == 0  # the latest (only) run
    page = out.read_text(encoding="utf-8")
    names = [t for t, _ in _tags(page)]
    assert "script" not in names
    assert sum(1 for t in names if t == "img") == 2  # pareto, progress; fit has no dataset
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)" in page
    assert "&lt;img src=x onerror=alert(3)&gt;" in page
    assert "No fit plot: " in page


def test_report_errors_are_one_line(capsys: pytest.CaptureFixture[str], viz_run: VizRun,
                                    tmp_path: Path) -> None:
    cases = [
        ([str(viz_run.path), "--run", "nope", "-o", str(tmp_path / "r.html")], "unknown run id"),
        ([str(tmp_path / "empty"), "-o", str(tmp_path / "r.html")], "no results under"),
        ([str(viz_run.path), "-o", str(tmp_path / "no" / "r.html")], "does not exist"),
    ]
    for argv, expected in cases:
        assert report_main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("sr-dist-report: error: ") and err.count("\n") == 1, err
        assert expected in err
    assert not (tmp_path / "r.html").exists()


def test_chromium_renders_the_report(report: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    console: list[str] = []
    errors: list[str] = []
    requests: list[str] = []
    shot = tmp_path / "report.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(report.as_uri(), wait_until="load")
            # The formulas are laid out as MathML: each has a real box, taller than a line of
            # plain text would be for the fractions.
            boxes = [m.bounding_box() for m in page.locator("#pareto math").all()]
            sizes = page.evaluate(
                "() => [...document.images].map(i => [i.naturalWidth, i.naturalHeight])")
            display = page.evaluate(
                "() => getComputedStyle(document.querySelector('#pareto math')).display")
            # In a laid-out fraction the numerator sits above the denominator (unknown tags
            # would flow side by side on one line).
            stacked = page.evaluate("""() => [...document.querySelectorAll('#pareto mfrac')]
                .map(f => [f.children[0].getBoundingClientRect(),
                           f.children[1].getBoundingClientRect()])
                .map(([n, d]) => n.bottom <= d.top + 0.5 && n.height > 0 && d.height > 0)""")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert console == [] and errors == []
    assert requests == [report.as_uri()]
    assert boxes and all(b is not None and b["width"] > 0 and b["height"] > 0 for b in boxes)
    assert display in ("math", "inline math", "block math")  # MathML Core's own layout
    assert stacked and all(stacked)
    assert len(sizes) == len(PLOT_KINDS) and all(w >= 500 and h >= 400 for w, h in sizes)
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3].astype(np.float64)
    assert pixels.shape[0] > 2000 and pixels.shape[1] >= 1280
    assert float(pixels.var()) > 1e-3
    assert 0.01 < float(np.mean(pixels.mean(axis=-1) < 0.9)) < 0.6
