"""sr-dist-query --plot on a real run: each picture is a real, non-blank image of the run's
numbers; the Pareto plot labels every front formula and marks the selected one; bad arguments
are one line on stderr and exit status 2."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from matplotlib.text import Annotation

from sr_dist.query_cli import main as query_main
from sr_dist.results import pareto_front, read_run, score_run, select_candidate
from sr_dist.viz import (
    INSTALL_HINT,
    PLOT_KINDS,
    VizError,
    figure,
    fit_points,
    formula_label,
    load_run,
    parse_constants,
    progress_series,
    render_plot,
)
from tests.viz.viz_run import VizRun

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]


def _query(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = query_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _is_real_picture(path: Path) -> np.ndarray:
    """The pixels of ``path`` after checking it is a sizeable image with something drawn."""
    pixels = imread(path)
    height, width = pixels.shape[:2]
    assert width >= 500 and height >= 400, (width, height)
    rgb = pixels[..., :3].astype(np.float64)
    assert float(rgb.var()) > 1e-3, "the image is blank"
    inked = float(np.mean(rgb.mean(axis=-1) < 0.9))  # not white or near-white
    assert 0.01 < inked < 0.6, inked
    return pixels


@pytest.mark.parametrize("kind", PLOT_KINDS)
def test_each_plot_is_a_real_picture(capsys: pytest.CaptureFixture[str], viz_run: VizRun,
                                     tmp_path: Path, kind: str) -> None:
    out = tmp_path / f"{kind}.png"
    code, stdout, err = _query(capsys, str(viz_run.path), "--plot", kind, "--out", str(out))
    assert code == 0, err
    assert stdout == "" and err.strip() == f"sr-dist-query: wrote {out} ({kind})"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _is_real_picture(out)


def test_the_pareto_plot_labels_every_front_formula(viz_run: VizRun) -> None:
    view = load_run(viz_run.path)  # the latest run: the only one
    assert view.run_id == viz_run.run_id
    front = pareto_front(viz_run.path, run_id=viz_run.run_id).to_pylist()
    assert len(front) >= 3 and [r["candidate_id"] for r in view.front] == [
        r["candidate_id"] for r in front]
    fig, info = figure("pareto", view)
    ax = fig.axes[0]
    notes = [t for t in ax.texts if isinstance(t, Annotation)]
    assert [n.get_text() for n in notes] == list(info.labels)
    assert len(notes) == len(front)
    # Each label sits by its own point and names its own formula.
    for note, row in zip(notes, front):
        assert note.xy == (row["complexity"], max(row["val_nmse"], 1e-12))
        assert note.get_text() == formula_label(row["expression"],
                                                parse_constants(row["constants"]), max_chars=64)
    assert ax.get_yscale() == "log"
    # The selected answer (selection.py's rule) is marked: a star on its point.
    chosen = select_candidate(viz_run.path, viz_run.run_id, rule="best")
    assert chosen is not None and front[info.index]["candidate_id"] == chosen["candidate_id"]
    stars = [c for c in ax.collections if c.get_label().startswith("selected")]
    assert len(stars) == 1
    assert tuple(stars[0].get_offsets()[0]) == (front[info.index]["complexity"],
                                                max(front[info.index]["val_nmse"], 1e-12))
    parsimony = load_run(viz_run.path, select="parsimony")
    picked = select_candidate(viz_run.path, viz_run.run_id, rule="parsimony")
    assert picked is not None
    assert parsimony.front[parsimony.selected]["candidate_id"] == picked["candidate_id"]


def test_the_fit_plot_shows_the_score_of_its_formula(viz_run: VizRun) -> None:
    view = load_run(viz_run.path, viz_run.run_id)
    points = fit_points(view)
    score = score_run(viz_run.path, viz_run.run_id, split="test")
    assert points.row["candidate_id"] == score.candidate_id
    assert points.metrics["nmse"] == pytest.approx(score.metrics["nmse"], rel=1e-12)
    assert points.y_true.shape == points.y_pred.shape == (int(score.metrics["n"]),)
    simplest = fit_points(view, 0)
    assert simplest.row["candidate_id"] == view.front[0]["candidate_id"]
    assert simplest.metrics["nmse"] >= points.metrics["nmse"] * 0.5
    info = render_plot("fit", view, index=0, fmt="svg")
    assert info.index == 0 and info.image.lstrip().startswith(b"<?xml")


def test_progress_is_each_agents_best_so_far(viz_run: VizRun) -> None:
    view = load_run(viz_run.path, viz_run.run_id)
    start, series = progress_series(view)
    record = read_run(viz_run.path, viz_run.run_id)
    assert record is not None and start == record.started_at
    assert set(series) == {0, 1}
    for t, best in series.values():
        assert len(t) == len(best) >= 1
        assert np.all(np.diff(t) >= 0) and np.all(np.diff(best) < 0)
        assert t[0] >= 0
    overall = min(float(best[-1]) for _, best in series.values())
    assert overall == pytest.approx(max(viz_run.best_val_nmse, 1e-12), rel=1e-12)
    _, info = figure("progress", view)
    assert info.series == 2 and info.labels == ("agent 0", "agent 1")


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str], viz_run: VizRun,
                                           tmp_path: Path) -> None:
    root, out = str(viz_run.path), str(tmp_path / "x.png")
    cases = [
        (("--plot", "histogram", "--out", out), "unknown --plot kind 'histogram'"),
        (("--plot", "pareto", "--run", "no-such-run", "--out", out), "unknown run id 'no-such-run'"),
        (("--plot", "fit", "--index", "999", "--out", out), "--index 999 is out of range"),
        (("--plot", "fit", "--index", "-1", "--out", out), "--index -1 is out of range"),
        (("--plot", "pareto"), "--plot pareto needs --out FILE.png"),
        (("--plot", "pareto", "--index", "0", "--out", out), "--index picks the formula"),
        (("--plot", "pareto", "--out", str(tmp_path / "x.gif")), "the name must end in .png"),
        (("--plot", "pareto", "--out", str(tmp_path / "no" / "x.png")), "does not exist"),
        (("--out", out), "--out and --index go with --plot KIND"),
    ]
    for argv, expected in cases:
        code, stdout, err = _query(capsys, root, *argv)
        assert code == 2 and stdout == "", argv
        assert err.startswith("sr-dist-query: error: ") and err.count("\n") == 1, err
        assert expected in err, (argv, err)
    assert not (tmp_path / "x.png").exists()


def test_without_matplotlib_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], viz_run: VizRun,
        tmp_path: Path) -> None:
    # None in sys.modules makes `import matplotlib...` raise ImportError, as if not installed.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(VizError, match="pip install 'sr-dist\\[plot\\]'"):
        render_plot("pareto", load_run(viz_run.path))
    code, _, err = _query(capsys, str(viz_run.path), "--plot", "pareto", "--out",
                          str(tmp_path / "p.png"))
    assert code == 2 and err == f"sr-dist-query: error: {INSTALL_HINT}\n"


def test_matplotlib_and_sympy_load_only_when_drawing() -> None:
    """`sr-dist-query`'s other commands and `import sr_dist.viz` stay as fast as before."""
    import subprocess

    code = ("import sys, sr_dist.query_cli, sr_dist.report_cli, sr_dist.viz; "
            "print(sorted(m for m in ('matplotlib', 'sympy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "[]"
