"""Front formulas as a person reads them: fitted constants put in, as a label or as MathML."""

from __future__ import annotations

from sr_dist.viz import formula_label, formula_mathml, with_constants


def test_constants_are_put_in_and_the_other_names_stay_variables() -> None:
    expr = with_constants("q*(c0*Ef + c1*B*v*sin(theta) + c2)", {"c0": 1.0, "c1": 0.99999994,
                                                                  "c2": 6.2e-08})
    assert {str(s) for s in expr.free_symbols} == {"q", "Ef", "B", "v", "theta"}
    assert str(expr) == "q*(B*v*sin(theta) + Ef + 6.2e-8)"  # 1 and 0.99999994 are both 1
    assert formula_label("c0/theta", {"c0": 0.20331467}) == "0.203/theta"
    assert formula_label("x**c0", {"c0": 2.0}) == "x^2"


def test_a_long_label_is_cut_and_an_unparsable_one_kept_as_stored() -> None:
    long = " + ".join(f"c{i}*sin(x*{i})" for i in range(12))
    label = formula_label(long, {f"c{i}": 1.5 for i in range(12)}, max_chars=30)
    assert len(label) == 30 and label.endswith("…")
    assert formula_label("c0*x<y", {"c0": 1.0}) == "c0*x<y"


def test_mathml_renders_fractions_and_escapes_what_it_cannot_render() -> None:
    markup = formula_mathml("c0/theta", {"c0": 0.2033})
    assert markup.startswith('<math display="inline">') and markup.endswith("</math>")
    assert "<mfrac><mn>0.2033</mn>" in markup
    assert formula_mathml("c0*x<script>", {"c0": 1.0}) == "<code>c0*x&lt;script&gt;</code>"
