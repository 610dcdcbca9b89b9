"""Fuzzing the loader: whatever is in a spec file, load_specs returns or raises SpecError.

Anything else (a KeyError from an odd loc, a RecursionError, a crash in the YAML layer)
would reach the CLI as a traceback instead of a diagnostic. A warm load from the cache
must also agree with the cold load it follows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specs.diagnostics import SpecError
from specs.loader import LoadResult, load_specs

FUZZ = settings()  # the profile's examples (tests/conftest.py)

_KEYS = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "labels",
    "spec",
    "project",
    "type",
    "gpus",
    "replicas",
    "minReplicas",
    "gpuTypes",
    "gpuType",
    "nodePools",
    "gpusPerNode",
    "memoryGiB",
    "quota",
    "limit",
    "overQuotaWeight",
    "parent",
    "department",
    "clusters",
    "walltime",
    "maxWalltime",
    "checkpoint",
    "strategy",
    "fanOut",
    "adapter",
    "slurm",
    "budget",
    "<<",
]
_WORDS = [
    "controlplane/v1",
    "controlplane/v2",
    "apps/v1",
    "Cluster",
    "Department",
    "Project",
    "Workload",
    "chem",
    "rivanna",
    "a100_80",
    "3d",
    "2h59m",
    "1-12:00:00",
    "slurm",
    "training",
    "inference",
    "null",
    "yes",
    "~",
    "12:30",
    "0x1F",
    ".inf",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_WORDS),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(_KEYS), st.text(max_size=8), st.integers(-3, 3), st.booleans())
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


@st.composite
def documents(draw: Callable[..., object]) -> object:
    """Mostly shaped like ours (so validation gets deep), sometimes anything at all."""
    if draw(st.integers(0, 4)) == 0:
        return draw(trees)
    doc: dict[object, object] = {
        "apiVersion": draw(
            st.sampled_from(["controlplane/v1", "controlplane/v1", "controlplane/v9", "v1"])
        ),
        "kind": draw(st.sampled_from(["Cluster", "Department", "Project", "Workload", "Nope"])),
        "metadata": draw(
            st.one_of(st.fixed_dictionaries({"name": st.sampled_from(_WORDS)}), trees)
        ),
    }
    if draw(st.booleans()):
        doc["spec"] = draw(trees)
    return doc


# YAML punctuation and spec words, so random text trips the scanner in interesting places.
_YAMLISH = st.lists(
    st.one_of(
        st.sampled_from(
            [
                ":",
                " ",
                "  ",
                "\n",
                "\n  ",
                "- ",
                "---\n",
                "...\n",
                "[",
                "]",
                "{",
                "}",
                ",",
                "&a ",
                "*a",
                "*b",
                "!",
                "!!str ",
                "!!binary ",
                "!Ref ",
                "<<: ",
                "? ",
                "|\n",
                ">-\n",
                "'",
                '"',
                "#",
                "%YAML 1.2\n",
                "\t",
                "\x00",
                "\ufeff",
                "é",
                "apiVersion: controlplane/v1\n",
                "kind: Workload\n",
                "metadata: {name: x}\n",
                "spec:\n  project: chem\n  gpus: 2\n",
            ]
        ),
        st.sampled_from(_KEYS),
        st.text(max_size=6),
    ),
    max_size=40,
).map("".join)


def check(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "specs"
        for name, content in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        cache_dir = Path(folder) / "cache"
        cold = _outcome(lambda: load_specs(root, cache_dir=cache_dir))
        warm = _outcome(lambda: load_specs(root, cache_dir=cache_dir))
        assert warm == cold


def _outcome(load: Callable[[], LoadResult]) -> object:
    """The result, or the diagnostics of the SpecError; anything else propagates and fails."""
    try:
        return load()
    except SpecError as err:
        assert err.diagnostics, "a SpecError always carries at least one diagnostic"
        return err.diagnostics


@FUZZ
@given(_YAMLISH)
def test_yamlish_text_never_escapes(text: str) -> None:
    check({"a.yaml": text.encode("utf-8", errors="surrogatepass")})


@FUZZ
@given(st.lists(documents(), min_size=1, max_size=4), st.lists(documents(), max_size=3))
def test_nested_structures_dumped_as_yaml(first: list[object], second: list[object]) -> None:
    check(
        {
            "a.yaml": yaml.safe_dump_all(first, allow_unicode=True).encode(),
            "sub/b.yml": yaml.safe_dump_all(second, default_flow_style=True).encode(),
        }
    )


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes(content: bytes) -> None:
    check({"a.yaml": content})


def test_deep_nesting_is_a_diagnostic_not_a_crash() -> None:
    # libyaml's composer would overflow the C stack on this; the loader must not hand it over.
    check({"a.yaml": b"[" * 100_000 + b"]" * 100_000})
    check({"b.yaml": b"a: " + b"[" * 150 + b"]" * 150})
