"""The text-generation accuracy gate (accelbench/models/accuracy_llm.py): pure parts on synthetic logits."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from accelbench.models import accuracy_llm


def test_eval_text_ships_with_its_source():
    path = Path(str(resources.files("accelbench.models") / "data" / accuracy_llm.EVAL_TEXT))
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert any("Project Gutenberg" in line and "1342" in line for line in header)
    assert any("public domain" in line for line in header)
    text = accuracy_llm.eval_text()
    assert text.startswith("It is a truth universally acknowledged") and "#" not in text
    assert len(text.split()) > 300


def test_identical_logits_agree_fully():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 100))
    tokens = rng.integers(0, 100, 50)
    got = accuracy_llm.compare_logits(logits, logits.copy(), tokens)
    assert got["agreement"] == 1.0 and got["kl_mean"] == pytest.approx(0, abs=1e-12)
    assert got["perplexity"] == pytest.approx(got["perplexity_reference"])


def test_kl_and_agreement_against_a_hand_computed_case():
    reference = np.log(np.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [1 / 3, 1 / 3, 1 / 3]]))
    candidate = np.log(np.array([[0.2, 0.7, 0.1], [0.5, 0.3, 0.2], [1 / 3, 1 / 3, 1 / 3]]))
    tokens = np.array([0, 1, 0])  # next tokens of positions 0 and 1: 1 and 0
    got = accuracy_llm.compare_logits(reference, candidate, tokens)
    kl0 = 0.7 * np.log(0.7 / 0.2) + 0.2 * np.log(0.2 / 0.7)
    assert got["kl_mean"] == pytest.approx(kl0 / 2)
    assert got["agreement"] == 0.5
    assert got["perplexity_reference"] == pytest.approx(np.exp(-(np.log(0.2) + np.log(0.5)) / 2))


def test_shape_mismatch_is_bad_input():
    from accelbench.errors import BadInputError

    with pytest.raises(BadInputError, match="logits shapes differ"):
        accuracy_llm.compare_logits(np.zeros((3, 4)), np.zeros((3, 5)), np.zeros(3, int))


def test_thresholds_from_the_card_else_the_defaults():
    assert accuracy_llm.thresholds(None, "int4") == accuracy_llm.DEFAULT_THRESHOLDS["int4"]
    assert accuracy_llm.thresholds({"int4": {"kl": 0.5}}, "int4") == (
        accuracy_llm.DEFAULT_THRESHOLDS["int4"][0],
        0.5,
    )
    assert accuracy_llm.thresholds({"int8": {"agreement": 0.5, "kl": 0.01}}, "int8") == (0.5, 0.01)
