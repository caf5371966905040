"""The classic sweeps (local Triton, builtin:identity: closed HTTP, open HTTP with 2 load processes, closed
gRPC at batch 2) and the generative ones (the reference server: OpenAI chat closed loop, completions open
loop) give the same documents as the code before the typed child configuration (issue 38): every key and
every deterministic value, measured values aside (edge_documents.shape). The recording is
tests/data/edge/*.json, written by ``python tests/edge_documents.py DIR`` before the refactor."""

from __future__ import annotations

import json

import pytest
from edge_documents import CLASSIC, DATA, GENERATIVE, REFERENCE_ARGS, classic_documents, generative_documents

from accelbench.loadtests import reference_server
from accelbench.serving.server import free_port

pytestmark = pytest.mark.slow


def recorded(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def test_classic_sweeps_give_the_recorded_documents(identity_repo, tmp_path):
    found = classic_documents(identity_repo, tmp_path)
    for name in CLASSIC:
        assert found[name] == recorded(name), name


def test_generative_sweeps_give_the_recorded_documents(tmp_path):
    with reference_server.running(free_port(), *REFERENCE_ARGS) as url:
        found = generative_documents(url, tmp_path)
    for name in GENERATIVE:
        assert found[name] == recorded(name), name
