"""Deployment files and node settings: any YAML text, any document shape and any values for each node kind's
parameters either load or raise `ConfigError` (one line naming where); never another exception."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from test.fuzz.strategies import CI
from user.config.strict import ConfigError, from_mapping, load_yaml
from user.deploy.deployment import Deployment
from user.runtime.kinds import KINDS, load_kind

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
KEYS = st.one_of(st.text(max_size=12), st.sampled_from(["name", "nodes", "kind", "params", "robots", "learning"]))
DOCUMENTS = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5), max_leaves=20
)


def _one_line_or_fine(build: Any) -> None:
    try:
        build()
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc).strip("\n").split("\n", 1)[0]


@CI
@given(text=st.text(max_size=300) | st.binary(max_size=300))
def test_any_deployment_text_loads_or_is_one_config_error(tmp_path_factory: pytest.TempPathFactory, text: Any) -> None:
    path = Path(tmp_path_factory.mktemp("yaml")) / "deploy.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        data = load_yaml(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    _one_line_or_fine(lambda: from_mapping(Deployment, data, where=str(path)))


@CI
@given(document=DOCUMENTS)
def test_any_deployment_document_loads_or_is_one_config_error(document: Any) -> None:
    _one_line_or_fine(lambda: from_mapping(Deployment, document, where="deploy.yaml"))


@pytest.mark.parametrize("kind", sorted(KINDS))
@CI
@given(params=st.dictionaries(KEYS, DOCUMENTS, max_size=4), data=st.data())
def test_any_parameters_of_a_node_kind_load_or_are_one_config_error(
    kind: str, params: dict[str, Any], data: st.DataObject
) -> None:
    spec = load_kind(kind).Params
    known = {name: data.draw(DOCUMENTS) for name in data.draw(st.lists(st.sampled_from(_fields(spec)), max_size=4))}
    _one_line_or_fine(lambda: from_mapping(spec, {**params, **known}, where=f"node ({kind})"))


def _fields(spec: type) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(spec))


def test_the_shipped_deployments_survive_a_round_trip_through_yaml() -> None:
    """The generators above reach real documents too: the shipped files load after dump and reload."""
    from user.deploy.deployment import CONFIG_DIR

    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        data = yaml.safe_load(yaml.safe_dump(load_yaml(path)))
        assert from_mapping(Deployment, data, where=str(path)).nodes
