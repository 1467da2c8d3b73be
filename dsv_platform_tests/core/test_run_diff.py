"""The manifest diff of two runs, pure: sections, dotted leaves, the kind, and the realization pairs offered next."""

from __future__ import annotations

from dsv_platform.core.diff.run_diff import ARTIFACT, MODEL_RUN, SECTIONS, RunInput, RunSide, diff_runs, leaves

H = {c: c * 64 for c in "abcdef"}


def _run(seed: int = 1, mh: str = H["a"], label: str = "fraud_labels:v6", commit: str = "1" * 40, **params: int) -> RunSide:
    doc = {
        "format": "dsv-model-run/1", "model": "m", "trainer": "pkg.mod:train", "realization": {"ref": f"ds:v6@sha256:{mh}", "manifest_hash": mh},
        "code": {"repo": "/r", "commit": commit, "dirty": False}, "environment": {"lock": "x", "python": "3.11"},
        "parameters": dict(params), "seed": seed, "metrics": {"auc": "0.9"}, "weights_hash": "w",
    }  # fmt: skip
    return RunSide(MODEL_RUN, "m", H["f"], doc, (RunInput("ds", f"ds:v6@sha256:{mh}", mh, "c", label),))


def test_leaves_flatten_nested_mappings_keep_lists_whole_and_skip_empty_mappings() -> None:
    assert leaves({"b": {"y": 1, "x": [1, 2]}, "a": {}}) == {"b.x": [1, 2], "b.y": 1}
    assert leaves(3) == {"": 3}


def test_the_same_run_twice_is_identical_with_nothing_to_diff_next() -> None:
    d = diff_runs(_run(), _run())
    assert d.identical and d.changes == () and d.data_pairs == ()
    assert all(d.to_document()["sections"][s] == [] for s in SECTIONS)


def test_seed_parameters_and_code_differ_by_dotted_name_in_section_order() -> None:
    d = diff_runs(_run(seed=1, epochs=3), _run(seed=2, commit="2" * 40, epochs=5, depth=4))
    assert [(c.section, c.name, c.a, c.b) for c in d.changes] == [
        ("code", "commit", "1" * 40, "2" * 40),
        ("configuration", "parameters.depth", None, 4),
        ("configuration", "parameters.epochs", 3, 5),
        ("seed", "", 1, 2),
    ]
    assert d.changed_sections() == ["code", "configuration", "seed"] and d.data_pairs == ()


def test_another_realization_is_a_data_change_a_label_change_and_a_pair_of_pinned_refs() -> None:
    d = diff_runs(_run(), _run(mh=H["b"], label="fraud_labels:v5"))
    assert {c.section for c in d.changes} == {"data", "labels"}
    assert [(c.name, c.a, c.b) for c in d.changes if c.section == "labels"] == [("ds", "fraud_labels:v6", "fraud_labels:v5")]
    [pair] = d.data_pairs
    assert (pair.dataset, pair.a, pair.b) == ("ds", f"ds:v6@sha256:{H['a']}", f"ds:v6@sha256:{H['b']}")


def test_a_model_run_against_an_artifact_says_the_kind_differs_and_pairs_inputs_by_dataset() -> None:
    art_doc = {"artifact": "report", "code": {"commit": "1" * 40}, "inputs": [], "parameters": {}, "seed": 1, "results": {"rows": "3"}}
    art = RunSide(ARTIFACT, "report", H["e"], art_doc, (RunInput("other", "other:v1", H["c"], "c", None),))
    d = diff_runs(_run(), art)
    first = next(c for c in d.changes if c.section == "configuration")
    assert (first.name, first.a, first.b) == ("kind", MODEL_RUN, ARTIFACT)
    assert [(p.dataset, p.a is None, p.b is None) for p in d.data_pairs] == [("ds", False, True), ("other", True, False)]
