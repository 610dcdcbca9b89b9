"""Loading spec repos: discovery, documents, schema errors with exact positions, the cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specs import loader
from specs.diagnostics import Diagnostic, SpecError
from specs.loader import LoadResult, load_specs
from specs.schema import json_schema
from tests.builders import base_docs, cluster, document, pool, project, workload
from tests.builders.files import dump, position, spec_tree


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A valid organisation in org.yaml; diagnostics name paths relative to it."""
    monkeypatch.chdir(tmp_path)
    spec_tree(tmp_path, {"org.yaml": base_docs()[:3]})
    return tmp_path


def errors(root: Path, **kwargs: Path) -> list[Diagnostic]:
    with pytest.raises(SpecError) as caught:
        load_specs(root, **kwargs)
    return caught.value.diagnostics


def single(root: Path) -> Diagnostic:
    found = errors(root)
    assert len(found) == 1, [str(d) for d in found]
    return found[0]


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------------------- valid trees


def test_valid_tree_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec_tree(tmp_path / "specs")
    result = load_specs(Path("specs"))
    desired = result.desired
    assert result.warnings == []
    assert list(desired.clusters) == ["rivanna"]
    assert list(desired.departments) == ["science"]
    assert list(desired.projects) == ["chem"]
    assert list(desired.workloads) == ["chem/md-run"]
    work = desired.workloads["chem/md-run"].spec
    assert (work.gpus, work.effective_min_replicas, work.is_preemptible) == (4, 1, True)
    pool_spec = desired.clusters["rivanna"].spec.node_pools[1]
    assert (pool_spec.name, pool_spec.gpus_per_node) == ("v100", 4)
    # Sources point at metadata.name, with paths as the user typed the root.
    line, column = position(tmp_path / "specs/workloads/chem.yaml", "md-run")
    assert (
        str(desired.source("Workload", "chem/md-run"))
        == f"specs/workloads/chem.yaml:{line}:{column}"
    )
    assert desired.source("Project", "chem") is not None
    assert len(desired.digest) == 64


def test_discovery_recurses_sorts_and_skips_hidden(repo: Path) -> None:
    write(repo, "b/w.yml", dump(workload("w-yml")))
    write(repo, "a/deep/w.yaml", dump(workload("w-deep")))
    write(repo, ".cp/cache/w.yaml", "not: [valid")
    write(repo, ".hidden/w.yaml", "not: [valid")
    write(repo, ".w.yaml", "not: [valid")
    write(repo, "notes.txt", "not: [valid")
    desired = load_specs(repo).desired
    assert list(desired.workloads) == ["chem/w-deep", "chem/w-yml"]


def test_several_documents_and_empty_ones(repo: Path) -> None:
    text = "---\n" + dump(workload("one")) + "---\n# only a comment\n---\n" + dump(workload("two"))
    write(repo, "w.yaml", text)
    result = load_specs(repo)
    assert list(result.desired.workloads) == ["chem/one", "chem/two"]
    assert result.warnings == []  # empty documents are skipped silently (not the last)


def test_absolute_root_outside_cwd_keeps_paths_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = spec_tree(tmp_path / "specs")
    write(root, "bad.yaml", "a: [")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (found,) = errors(root)
    assert found.path == str(root / "bad.yaml")


def test_single_file_root(repo: Path) -> None:
    result = load_specs(repo / "org.yaml")
    assert list(result.desired.projects) == ["chem"]


def test_digest_covers_what_the_documents_say_not_how_or_where(repo: Path) -> None:
    """A plan records the specs' digest, and a saved or reviewed plan is good while it is
    the same: a comment or a file renamed changes nothing a plan depends on."""
    first = load_specs(repo).desired.digest
    assert load_specs(repo).desired.digest == first
    (repo / "org.yaml").write_text((repo / "org.yaml").read_text() + "\n# comment\n")
    assert load_specs(repo).desired.digest == first
    (repo / "org.yaml").rename(repo / "org2.yaml")
    assert load_specs(repo).desired.digest == first
    text = (repo / "org2.yaml").read_text()
    assert "gpus: 8" in text
    (repo / "org2.yaml").write_text(text.replace("gpus: 8", "gpus: 9", 1))
    assert load_specs(repo).desired.digest != first


def test_yaml_12_scalars_and_merge_keys(repo: Path) -> None:
    write(
        repo,
        "w.yaml",
        """\
apiVersion: controlplane/v1
kind: Workload
metadata:
  name: "no"                 # a quoted name
  labels: {answer: no, time: 12:30}  # YAML 1.2: strings, not false / base-60
spec: {project: chem, gpus: 2}
---
apiVersion: controlplane/v1
kind: Workload
metadata:
  name: merged
  labels: &common {team: md, tier: gold}
  annotations:
    <<: *common
    tier: silver
spec: {project: chem}
""",
    )
    desired = load_specs(repo).desired
    assert desired.workloads["chem/no"].metadata.labels == {"answer": "no", "time": "12:30"}
    merged = desired.workloads["chem/merged"].metadata
    assert merged.annotations == {"team": "md", "tier": "silver"}


# ----------------------------------------------------------------------- schema mistakes


def test_unknown_key_suggests_the_closest(repo: Path) -> None:
    write(
        repo,
        "w.yaml",
        """\
apiVersion: controlplane/v1
kind: Workload
metadata: {name: md-run}
spec:
  project: chem
  gpu: 4
""",
    )
    assert (
        str(single(repo)) == "w.yaml:6:3: error: spec.gpu: unknown key 'gpu'; did you mean 'gpus'?"
    )


def test_snake_case_key_suggests_camel_case(repo: Path) -> None:
    path = write(
        repo,
        "c.yaml",
        dump(cluster("other", pools=[pool(gpus_per_node=8) | {"max_walltime": "3d"}])),
    )
    found = single(repo)
    assert (found.path, (found.line, found.column)) == ("c.yaml", position(path, "max_walltime"))
    assert found.field == "spec.nodePools.0.max_walltime"
    assert found.message == "unknown key 'max_walltime'; did you mean 'maxWalltime'?"


def test_unknown_key_without_a_close_match_lists_valid_keys(repo: Path) -> None:
    write(repo, "w.yaml", dump(workload(checkpoint={"signal": "USR1", "zzz": 1})))
    found = single(repo)
    assert found.field == "spec.checkpoint.zzz"
    assert found.message == "unknown key 'zzz'; valid keys here: grace, signal, total"


def test_wrong_type(repo: Path) -> None:
    path = write(repo, "c.yaml", dump(cluster("other", pools=[pool(gpus_per_node="eight")])))  # type: ignore[arg-type]
    found = single(repo)
    assert (found.line, found.column) == position(path, "eight")
    assert found.field == "spec.nodePools.0.gpusPerNode"
    assert found.message == "expected a whole number, got 'eight'"


def test_a_pool_without_gpus_is_an_error_on_the_pool(repo: Path) -> None:
    """``gpusPerNode: 0`` was accepted, and the errors landed on every workload that
    could not fit it. Pools are GPU nodes (CPU-only *workloads* run on them): a pool of
    none is an error of its own, at the pool."""
    path = write(repo, "c.yaml", dump(cluster("other", pools=[pool(gpus_per_node=0)])))
    found = single(repo)
    assert (found.line, found.column) == position(path, "gpusPerNode: 0", offset=13)
    assert found.field == "spec.nodePools.0.gpusPerNode"
    assert found.message.startswith("a node pool needs at least 1 GPU per node")
    schema = json_schema()["$defs"]["NodePool"]["properties"]["gpusPerNode"]  # type: ignore[index]
    assert schema["minimum"] == 1


def test_bad_duration_carries_the_hint(repo: Path) -> None:
    write(
        repo,
        "w.yaml",
        """\
apiVersion: controlplane/v1
kind: Workload
metadata: {name: md-run}
spec: {project: chem, walltime: 3x}
""",
    )
    assert str(single(repo)) == (
        "w.yaml:4:33: error: spec.walltime: '3x' is not a duration; "
        "write it like 90s, 45m, 2h59m, 3d or D-HH:MM:SS"
    )


@pytest.mark.parametrize(
    ("written", "meant"),
    [("1M", "'1m' (a minute; there is no unit of months)"), ("2H", "'2h'"), ("1D12H", "'1d12h'")],
)
def test_a_duration_unit_in_upper_case_is_an_error(repo: Path, written: str, meant: str) -> None:
    """``walltime: 1M`` was read as a minute, with no word, where a user may have meant a
    month (user trial): units are lower case, and an upper-case one says what it would be."""
    write(repo, "w.yaml", WORKLOAD_WITH_WALLTIME.format(written))
    assert str(single(repo)) == (
        f"w.yaml:4:33: error: spec.walltime: '{written}': units are lower case; did you mean "
        f"{meant}?"
    )


WORKLOAD_WITH_WALLTIME = """\
apiVersion: controlplane/v1
kind: Workload
metadata: {{name: md-run}}
spec: {{project: chem, walltime: {}}}
"""


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (workload(walltime=97), "spec.walltime"),
        (workload(walltime="2h", checkpoint={"grace": 97}), "spec.checkpoint.grace"),
        (workload(walltime="2h", checkpoint={"total": 97}), "spec.checkpoint.total"),
        (project("p2", maxWalltime=97), "spec.maxWalltime"),
        (project("p2", minRuntime=97), "spec.minRuntime"),
        (project("p2", fairshare={"halfLife": 97}), "spec.fairshare.halfLife"),
        (cluster("other", pools=[pool(maxWalltime=97)]), "spec.nodePools.0.maxWalltime"),
    ],
)
def test_a_bare_number_is_not_a_duration(repo: Path, doc: dict[str, object], field: str) -> None:
    """``walltime: 90`` was read as 90 seconds, where Slurm reads ``--time=90`` as 90
    minutes: the job was killed 90 s after it started. A number without a unit is an error
    in every duration field, which says what to write instead."""
    path = write(repo, "d.yaml", dump(doc))
    found = single(repo)
    assert (found.line, found.column) == position(path, "97")
    assert found.field == field
    if field.endswith("halfLife"):  # a fair-share memory: told in days
        assert found.message == "97 has no unit; write 97d, 97h or 97m"
    else:
        assert found.message == "97 has no unit (minutes? seconds?); write 97m, 97s or 1h37m"


@pytest.mark.parametrize(("value", "hint"), [("45", "45m or 45s"), ("1.5", "it like 90s, 45m")])
def test_a_bare_number_names_the_unit_to_add(repo: Path, value: str, hint: str) -> None:
    """A short number has no hours to spell out; a fraction is no whole number of either."""
    head = "apiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: x}\n"
    write(repo, "w.yaml", f"{head}spec: {{project: chem, walltime: {value}}}\n")
    found = single(repo)
    assert (found.line, found.column, found.field) == (4, 33, "spec.walltime")
    assert found.message.startswith(f"{value} has no unit (minutes? seconds?); write {hint}")


def test_bad_name(repo: Path) -> None:
    path = write(repo, "w.yaml", dump(workload("MD_run!")))
    found = single(repo)
    assert (found.line, found.column) == position(path, "MD_run!")
    assert found.field == "metadata.name"
    assert found.message.startswith("'MD_run!' is not a valid name: use 1-63 lowercase letters")


def test_missing_required_field_points_at_its_parent(repo: Path) -> None:
    write(
        repo,
        "w.yaml",
        """\
apiVersion: controlplane/v1
kind: Workload
metadata: {name: md-run}
spec:
  gpus: 4
""",
    )
    assert (
        str(single(repo))
        == "w.yaml:4:1: error: spec.project: missing required key 'project'; add it"
    )


def test_unknown_kind_lists_valid_kinds(repo: Path) -> None:
    write(repo, "w.yaml", "apiVersion: controlplane/v1\nkind: Workloads\nmetadata: {name: x}\n")
    assert str(single(repo)) == (
        "w.yaml:2:7: error: kind: unknown kind 'Workloads'; valid kinds are "
        "Cluster, Department, Project, Workload; did you mean 'Workload'?"
    )


def test_unsupported_api_version(repo: Path) -> None:
    write(repo, "w.yaml", "apiVersion: controlplane/v2\nkind: Workload\nmetadata: {name: x}\n")
    assert str(single(repo)) == (
        "w.yaml:1:13: error: apiVersion: unsupported apiVersion 'controlplane/v2'; "
        "this version reads controlplane/v1"
    )


def test_missing_api_version_on_one_of_our_kinds(repo: Path) -> None:
    write(repo, "w.yaml", "kind: Project\nmetadata: {name: x}\n")
    assert str(single(repo)) == (
        "w.yaml:1:1: error: apiVersion: missing apiVersion; add 'apiVersion: controlplane/v1' to this Project"
    )


def test_yaml_syntax_error(repo: Path) -> None:
    write(
        repo,
        "w.yaml",
        "apiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: x\nspec: {}\n",
    )
    found = single(repo)
    assert (found.path, found.line, found.column, found.field) == ("w.yaml", 4, 5, None)
    assert found.message.startswith("YAML syntax error: ")
    assert "line 3" in found.message


def test_documents_before_a_syntax_error_are_still_checked(repo: Path) -> None:
    write(repo, "w.yaml", dump(workload(gpu=1)) + "---\nkey: [unclosed\n")
    found = errors(repo)
    assert [d.field for d in found] == ["spec.gpu", None]


def gpus_twice(repo: Path, second: int) -> None:
    """A workload whose ``gpus`` key is given twice: 1 on line 6, ``second`` on line 7."""
    head = "apiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: md-run}\n"
    write(repo, "w.yaml", f"{head}spec:\n  project: chem\n  gpus: 1\n  gpus: {second}\n")


def test_duplicate_key(repo: Path) -> None:
    gpus_twice(repo, 2)
    assert str(single(repo)) == (
        "w.yaml:7:3: error: spec.gpus: duplicate key 'gpus' (first on line 6); "
        "YAML would keep only the last one, remove or rename one"
    )


def test_an_error_in_a_duplicated_key_points_at_the_value_kept(repo: Path) -> None:
    """YAML keeps the last of two equal keys: an error in its value points there, not at
    the first one's value (user trial: `gpus: 64`'s error pointed at `gpus: 1`)."""
    gpus_twice(repo, -64)
    found = sorted((d.line, d.column, d.field) for d in errors(repo))
    assert found == [(7, 3, "spec.gpus"), (7, 9, "spec.gpus")], found


def test_min_replicas_above_replicas_points_at_min_replicas(repo: Path) -> None:
    path = write(repo, "w.yaml", dump(workload(replicas=2, minReplicas=3)))
    found = single(repo)
    assert (found.line, found.column) == position(path, "3\n", 1)
    assert found.field == "spec.minReplicas"
    assert found.message == "minReplicas 3 exceeds replicas 2; lower minReplicas or raise replicas"


def test_limit_below_deserved_points_at_limit(repo: Path) -> None:
    path = write(
        repo, "p.yaml", dump(document("Project", "bio", {"quota": {"gpus": 8, "limit": 4}}))
    )
    found = single(repo)
    assert (found.line, found.column) == position(path, "4\n")
    assert found.field == "spec.quota.limit"
    assert "limit 4 is below the deserved 8 GPUs" in found.message


def test_literal_suggests_the_closest(repo: Path) -> None:
    write(repo, "c.yaml", dump(cluster("other", adapter="slrum")))
    found = single(repo)
    assert found.field == "spec.adapter"
    assert (
        found.message == "'slrum' is not one of simulator, slurm, kubernetes; did you mean 'slurm'?"
    )


def test_quota_of_the_wrong_shape_is_one_error(repo: Path) -> None:
    path = write(repo, "p.yaml", dump(document("Project", "bio", {"quota": 5})))
    found = single(repo)
    assert (found.line, found.column) == position(path, "quota: 5", offset=len("quota: "))
    assert (found.field, found.message) == ("spec.quota", "expected a list or a mapping, got 5")


def test_quota_list_errors_name_the_entry(repo: Path) -> None:
    path = write(
        repo,
        "p.yaml",
        dump(
            document(
                "Project",
                "bio",
                {"quota": [{"gpuType": "a100_80", "gpus": 2}, {"gpuType": "v100", "gpus": -1}]},
            )
        ),
    )
    found = single(repo)
    assert (found.line, found.column) == position(path, "-1")
    assert (found.field, found.message) == ("spec.quota.1.gpus", "must be at least 0, got -1")


def test_bad_map_key_points_at_the_key(repo: Path) -> None:
    path = write(
        repo,
        "c.yaml",
        dump(
            cluster("other", gpu_types={"A100": {"memoryGiB": 80}}, pools=[pool(gpu_type="A100")])
        ),
    )
    found = errors(repo)
    assert (found[0].line, found[0].column) == position(path, "A100:")
    assert found[0].field == "spec.gpuTypes.A100"


def test_unsupported_tag_and_recursive_alias(repo: Path) -> None:
    write(
        repo,
        "w.yaml",
        """\
apiVersion: controlplane/v1
kind: Workload
metadata:
  name: md-run
  labels: &loop {a: *loop}
spec: {project: chem, command: !Ref [x]}
""",
    )
    found = {d.field: d.message for d in errors(repo)}
    assert found["spec.command"] == "unsupported YAML tag '!Ref'; remove it"
    assert any("refers to a node that contains it" in m for m in found.values())


def _deep(depth: int, metadata: str = "name: x", more: str = "") -> str:
    """A workload whose command nests ``depth`` flow sequences, on line 4."""
    deep = "[" * depth + "]" * depth
    return f"""\
apiVersion: controlplane/v1
kind: Workload
metadata: {{{metadata}}}
spec: {{project: chem, command: {deep}{more}}}
"""


def test_self_merging_and_very_deep_documents_are_diagnosed(repo: Path) -> None:
    # deeper than the pure-Python composer can recurse, within what libyaml reads
    write(repo, "w.yaml", _deep(900, "name: x, labels: &x {<<: *x, a: b}", ", gpus: 1, gpus: 2"))
    messages = [d.message for d in errors(repo)]
    assert "an alias refers to a node that contains it" in messages
    assert "nested deeper than 100 levels" in messages
    assert any(m.startswith("duplicate key 'gpus'") for m in messages)


def test_a_document_nested_beyond_libyaml_s_limit_is_an_error_at_its_line(repo: Path) -> None:
    """libyaml (PyYAML >= 6.0.4 bundles it so) refuses to nest deeper than 1,000 levels:
    a syntax error at the document's line; older builds read it and the loader's own
    depth check names the same line."""
    write(repo, "w.yaml", _deep(1500))
    found = [d for d in errors(repo) if d.path.endswith("w.yaml")]
    assert found and all(d.line == 4 for d in found), [str(d) for d in found]
    assert any("nest" in d.message for d in found), [str(d) for d in found]


def test_not_utf8(repo: Path) -> None:
    (repo / "w.yaml").write_bytes(b"apiVersion: controlplane/v1\nkind: \xff\n")
    assert str(single(repo)) == "w.yaml:2:7: error: not UTF-8 text; save the file as UTF-8"


# ----------------------------------------------------------------------- other tools' YAML


def test_foreign_documents_are_skipped_with_a_warning(repo: Path) -> None:
    write(
        repo,
        "mixed.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nspec: {replicas: 1}\n"
        + "---\n"
        + dump(workload())
        + "---\nname: CI\non: [push]\n---\n- a list\n",
    )
    result = load_specs(repo)
    assert list(result.desired.workloads) == ["chem/md-run"]
    assert [str(w) for w in result.warnings] == [
        "mixed.yaml:1:13: warning: apiVersion: apiVersion 'apps/v1' belongs to another tool; document skipped",
        "mixed.yaml:14:1: warning: not a controlplane document (no apiVersion); document skipped",
        "mixed.yaml:17:1: warning: not a controlplane document (no apiVersion); document skipped",
    ]


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("contolplane/v1", "Workload"),
        ("controlpalne/v1", "Workload"),
        ("ControlPlane/v1", "Project"),
        ("controlplane", "Workload"),
        ("controlplanev1", "Cluster"),
        ("contolplane/v1", "Deployment"),
    ],
)
def test_a_near_miss_of_our_api_version_is_an_error(
    repo: Path, api_version: str, kind: str
) -> None:
    """``apiVersion: contolplane/v1`` on a running workload was skipped as another tool's
    document with a warning only: validate passed and the next apply pruned the workload.
    A group that close to ours is a typo of it, whatever the kind."""
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: md-run}}\n"
    write(repo, "w.yaml", text + "spec: {project: chem, gpus: 4}\n")
    assert str(single(repo)) == (
        f"w.yaml:1:13: error: apiVersion: unknown apiVersion '{api_version}'; "
        "did you mean controlplane/v1? (too close to ours to skip as another tool's)"
    )


@pytest.mark.parametrize("api_version", ["controlp", "c", "controlplan"])
def test_an_api_version_cut_short_is_an_error(repo: Path, api_version: str) -> None:
    """A spec file cut off inside an apiVersion (half saved: ``apiVersion: controlp``, the
    rest of the file gone) was skipped as another tool's document with a warning: validate
    passed, and the workloads after it were pruned (user trial, under cp watch)."""
    write(repo, "x.yaml", f"apiVersion: {api_version}\n")
    assert str(single(repo)) == (
        f"x.yaml:1:13: error: apiVersion: apiVersion '{api_version}' is cut short: the start "
        "of controlplane/v1 (a file saved half-written?)"
    )


@pytest.mark.parametrize(
    ("tail", "column", "shown"),
    [
        ("apiVer", 1, "'apiVer', the start of a document"),
        ("apiVersion", 1, "'apiVersion', the start of a document"),
        ("a", 1, "'a', the start of a document"),
        ("kin", 1, "'kin', the start of a document"),
        ("apiVersion:", 1, "'apiVersion:' with no value"),
        ("apiVersion: ", 1, "'apiVersion:' with no value"),
        ("apiVersion:\n", 1, "'apiVersion:' with no value"),
        ("kind: Work", 1, "'kind: Work', the start of a document"),
    ],
)
@pytest.mark.parametrize("after", [False, True])
def test_a_file_cut_in_the_first_line_of_a_document_is_an_error(
    repo: Path, tail: str, column: int, shown: str, after: bool
) -> None:
    """A spec file caught half-written inside the first line of a document (``apiVer``, or
    ``apiVersion:`` with nothing after it) read as another tool's document, skipped with a
    warning: the specs loaded, and the workloads of the rest of the file were pruned
    (user trial: ``cp watch --auto-approve`` cancelled an interactive session). As for
    ``apiVersion: controlp``, it is an error. ``after``: the cut document follows a whole one."""
    before = dump(workload("whole")) + "---\n" if after else ""
    write(repo, "x.yaml", before + tail)
    line = before.count("\n") + 1
    assert str(single(repo)) == (
        f"x.yaml:{line}:{column}: error: the file ends in {shown}: it looks cut short "
        "(a file saved half-written?)"
    )


@pytest.mark.parametrize(
    "text",
    ["", "\n", "  \n\n", "\ufeff", "---\n", "--- \n", "---\n---\n", "null\n", "~\n", "...\n"],
)
def test_an_empty_spec_file_is_an_error(repo: Path, text: str) -> None:
    """A file emptied for a moment (the first half of a two-step save: truncated, then
    written) loaded as a file of no documents: ``cp watch`` pruned the running workloads it
    had held, and started them again once it was written (user trial). Emptying a file is
    no way to remove its workloads (deleting it is), so it is an error; so is a file of
    empty documents only (``---``, a YAML file's usual first line: trialS)."""
    write(repo, "w.yaml", text)
    assert str(single(repo)) == (
        "w.yaml:1:1: error: the file is empty: one caught while it was saved? (to remove "
        "its workloads, delete the file)"
    )


@pytest.mark.parametrize(
    "tail",
    ["---\n", "---\n\n", "--- \n", "---", "---\n...\n"],
)
@pytest.mark.parametrize("first", ["whole", "a"])
def test_a_file_cut_at_a_document_separator_is_an_error(repo: Path, tail: str, first: str) -> None:
    """A file cut just after a ``---`` (the rest of it not written yet) held its whole
    documents and an empty last one: it loaded, and ``cp watch`` cancelled the running
    workload of the document that was missing (user trial T: an interactive notebook's
    session lost). An empty last document after one with content is an error."""
    before = dump(workload("whole")) if first == "whole" else "a\n"
    write(repo, "x.yaml", before + tail)
    line = before.count("\n") + 1
    assert str(single(repo)) == (
        f"x.yaml:{line}:1: error: the file ends in '---' and nothing after it: it looks cut "
        "short at the start of a document (a file saved half-written?); if the file is "
        "whole, remove that last '---'"
    )


def test_a_document_commented_out_at_the_end_still_loads(repo: Path) -> None:
    """Commenting out a file's last document is an edit people make (review): not a cut."""
    write(repo, "x.yaml", dump(workload("whole")) + "---\n# apiVersion: controlplane/v1\n")
    assert list(load_specs(repo).desired.workloads) == ["chem/whole"]


@pytest.mark.parametrize(
    "text", ["# nothing here yet\n", "# all commented out\n---\n", "---\n# all commented\n"]
)
def test_a_file_of_comments_only_still_loads(repo: Path, text: str) -> None:
    write(repo, "w.yaml", text)
    assert load_specs(repo).desired.workloads == {}


@pytest.mark.parametrize("text", ["notes\n---\n" + "apiVersion: batch/v1\nkind: Job\n"])
def test_scalars_and_foreign_documents_that_end_no_file_are_still_skipped(
    repo: Path, text: str
) -> None:
    """Only the last document of a file can be cut short; a bare word before another
    document stays a skipped one."""
    write(repo, "x.yaml", text)
    assert load_specs(repo).warnings


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("kueue.x-k8s.io/v1beta1", "Workload"),
        ("cluster.x-k8s.io/v1beta1", "Cluster"),
        ("controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlane"),
        ("batch/v1", "Job"),
    ],
)
def test_other_tools_documents_of_our_kinds_are_still_skipped(
    repo: Path, api_version: str, kind: str
) -> None:
    """Kueue has a Workload, Cluster API a Cluster (and a controlplane.cluster.x-k8s.io
    group): far from ours, they stay other tools' documents."""
    write(repo, "w.yaml", f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x}}\n")
    assert [str(w) for w in load_specs(repo).warnings] == [
        f"w.yaml:1:13: warning: apiVersion: apiVersion '{api_version}' belongs to another "
        "tool; document skipped"
    ]


def test_foreign_documents_may_break_our_rules(repo: Path) -> None:
    write(repo, "k8s.yaml", "apiVersion: v1\nkind: ConfigMap\ndata: {a: 1, a: 2}\nx: !Secret y\n")
    assert len(load_specs(repo).warnings) == 1


# ----------------------------------------------------------------------- many at once


def test_every_mistake_is_reported_at_once_sorted(repo: Path) -> None:
    write(repo, "a.yaml", dump(workload("one", gpu=2), workload("two", walltime="soon")))
    write(
        repo,
        "b/c.yaml",
        "apiVersion: controlplane/v1\nkind: Thing\nmetadata: {name: x}\n---\nbad: [\n",
    )
    write(
        repo,
        "b/d.yaml",
        dump(project("bio", department="nowhere"), workload("three", project="bioo")),
    )
    found = errors(repo)
    assert [(d.path, d.field) for d in found] == [
        ("a.yaml", "spec.gpu"),
        ("a.yaml", "spec.walltime"),
        ("b/c.yaml", "kind"),
        ("b/c.yaml", None),
        ("b/d.yaml", "spec.department"),
        ("b/d.yaml", "spec.project"),
    ]
    assert found == sorted(found, key=lambda d: (d.path, d.line, d.column))
    assert str(SpecError(found)).startswith("6 errors in the specs\na.yaml:")


# ----------------------------------------------------------------------- cache


def test_warm_load_equals_cold_load(repo: Path) -> None:
    spec_tree(
        repo,
        {
            "w.yaml": [
                workload(f"w{i}", walltime="2h", checkpoint={"grace": "5m"}) for i in range(5)
            ]
        },
    )
    # Large floats must survive the cache exactly (non-finite ones are spec errors now).
    write(
        repo,
        "c.yaml",
        dump(
            cluster(
                "other",
                gpu_types={"a100_80": {"memoryGiB": 80, "costPerGpuHour": 1.5e11}},
                pools=[pool()],
            )
        ),
    )
    write(repo, "skip.yaml", "apiVersion: apps/v1\nkind: X\n")
    cache_dir = repo / ".cp" / "cache"
    cold = load_specs(repo, cache_dir=cache_dir)
    assert len(list((cache_dir / "specs").glob("*.json"))) == 4
    warm = load_specs(repo, cache_dir=cache_dir)
    assert warm == cold
    assert warm.desired.clusters["other"].spec.gpu_types["a100_80"].cost_per_gpu_hour == 1.5e11
    assert (
        warm.desired.workloads["chem/w0"].spec.model_fields_set
        == cold.desired.workloads["chem/w0"].spec.model_fields_set
    )


def test_warm_load_parses_nothing_and_an_edit_reparses_one_file(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        write(repo, f"w{i}.yaml", dump(workload(f"w{i}")))
    cache_dir = repo / "cache"
    load_specs(repo, cache_dir=cache_dir)
    parsed: list[str] = []
    real = loader._read_file

    def spy(path: str, key: str, text: str) -> loader._Read:
        parsed.append(path)
        return real(path, key, text)

    monkeypatch.setattr(loader, "_read_file", spy)
    load_specs(repo, cache_dir=cache_dir)
    assert parsed == []
    write(repo, "w1.yaml", dump(workload("w1", gpus=2)))
    result = load_specs(repo, cache_dir=cache_dir)
    assert parsed == ["w1.yaml"]
    assert result.desired.workloads["chem/w1"].spec.gpus == 2
    assert len(list((cache_dir / "specs").glob("*.json"))) == 4  # the old entry was pruned


def test_corrupt_cache_entries_are_misses(repo: Path) -> None:
    cache_dir = repo / "cache"
    cold = load_specs(repo, cache_dir=cache_dir)
    (entry,) = (cache_dir / "specs").glob("*.json")
    for garbage in (
        b"{not json",
        b'{"key": "x", "documents": []}',
        json.dumps({"key": entry.stem}).encode() + b"x",
        b"",
    ):
        entry.write_bytes(garbage)
        assert load_specs(repo, cache_dir=cache_dir) == cold
    # A well-formed entry whose documents break the schema is a miss too.
    entry.write_text(
        json.dumps({"key": entry.stem, "documents": [{"line": 1, "column": 1, "document": {}}]})
    )
    assert load_specs(repo, cache_dir=cache_dir) == cold


def test_files_with_errors_are_not_cached(repo: Path) -> None:
    write(repo, "w.yaml", dump(workload(gpu=1)))
    cache_dir = repo / "cache"
    errors(repo, cache_dir=cache_dir)
    errors(repo, cache_dir=cache_dir)  # still reported on the second run
    assert len(list((cache_dir / "specs").glob("*.json"))) == 1  # org.yaml only


def test_cached_files_keep_their_warnings(repo: Path) -> None:
    write(repo, "skip.yaml", "apiVersion: apps/v1\nkind: X\n")
    cache_dir = repo / "cache"
    cold = load_specs(repo, cache_dir=cache_dir)
    assert len(cold.warnings) == 1
    assert load_specs(repo, cache_dir=cache_dir).warnings == cold.warnings


def test_unwritable_cache_is_ignored(repo: Path) -> None:
    blocker = repo / "cache"
    blocker.write_text("a file, not a directory")
    assert isinstance(load_specs(repo, cache_dir=blocker), LoadResult)


def test_cross_reference_errors_still_found_from_cache(repo: Path) -> None:
    write(repo, "w.yaml", dump(workload(project="nowhere")))
    cache_dir = repo / "cache"
    first = errors(repo, cache_dir=cache_dir)
    assert errors(repo, cache_dir=cache_dir) == first
    assert [d.field for d in first] == ["spec.project"]


# ----------------------------------------------------------------------- schema


def test_json_schema_has_the_four_kinds_in_camel_case() -> None:
    schema = json_schema()
    text = json.dumps(schema)
    assert json.loads(text) == schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    refs = {option["$ref"].rsplit("/", 1)[-1] for option in schema["oneOf"]}  # type: ignore[attr-defined]
    assert refs == {"Cluster", "Department", "Project", "Workload"}
    defs = schema["$defs"]
    assert "gpusPerNode" in defs["NodePool"]["properties"]  # type: ignore[index]
    assert "minReplicas" in defs["WorkloadSpec"]["properties"]  # type: ignore[index]
    assert "gpus_per_node" not in text
    assert defs["Checkpoint"]["properties"]["grace"]["default"] == "10m"  # type: ignore[index]
    assert defs["Workload"]["additionalProperties"] is False  # type: ignore[index]


def test_json_schema_types_every_duration_as_text() -> None:
    """A bare number is no duration in a spec (it has no unit), so no schema may offer one."""
    defs = json_schema()["$defs"]
    fields = {
        "WorkloadSpec": ["walltime"],
        "Checkpoint": ["grace", "total"],
        "ProjectSpec": ["maxWalltime", "minRuntime"],
        "Fairshare": ["halfLife"],
        "NodePool": ["maxWalltime"],
    }
    for model, names in fields.items():
        for name in names:
            field = defs[model]["properties"][name]  # type: ignore[index]
            types = {option.get("type") for option in field.get("anyOf", [field])}
            assert types <= {"string", "null"} and "string" in types, (model, name, types)


def test_json_schema_references_resolve() -> None:
    schema = json_schema()
    text = json.dumps(schema)
    refs = set(re.findall(r'"\$ref": "#/\$defs/([^"]+)"', text))
    assert refs and refs <= set(schema["$defs"])  # type: ignore[arg-type]


def test_checkpoint_signals_are_named_from_a_closed_list(repo: Path) -> None:
    """SIGUSR2, sigusr2 and USR2 are one signal; the spec keeps its plain name."""
    spec_tree(repo, {"w.yaml": [workload(walltime="2h", checkpoint={"signal": "SIGusr2"})]})
    loaded = load_specs(repo)
    checkpoint = loaded.desired.workloads["chem/md-run"].spec.checkpoint
    assert checkpoint is not None and checkpoint.signal == "USR2"


def test_values_of_another_type_are_not_converted(repo: Path) -> None:
    """YAML says what type a value is: a quoted number, a yes/no string or a boolean
    priority is a mistake to report, never a value to guess (lax parsing read
    ``priority: true`` as 1 and ``preemptible: "yes"`` as true)."""
    write(
        repo,
        "w.yaml",
        """\
apiVersion: controlplane/v1
kind: Workload
metadata: {name: typed}
spec:
  project: chem
  gpus: "2"
  replicas: 1.0
  priority: true
  preemptible: "yes"
""",
    )
    found = {d.field: (d.line, d.message) for d in errors(repo)}
    assert found == {
        "spec.gpus": (6, "expected a whole number, got '2'"),
        "spec.replicas": (7, "expected a whole number, got 1.0"),
        "spec.priority": (8, "expected a whole number, got true"),
        "spec.preemptible": (
            9,
            "expected true or false, got 'yes'; YAML 1.2 reads yes, no, on and off as text: "
            "write true or false",
        ),
    }


def test_a_directory_without_specs_is_warned_about(tmp_path: Path) -> None:
    (tmp_path / "notes.yaml").write_text("just: a file of another tool\n")
    loaded = load_specs(tmp_path)
    assert (
        "warning",
        "no spec documents here (YAML files of apiVersion controlplane/v1)",
    ) in [(d.severity, d.message.split(":")[0]) for d in loaded.warnings]
    assert not loaded.desired.clusters and not loaded.desired.workloads


def test_the_cache_key_covers_every_module_a_document_is_validated_by() -> None:
    """A cached file is trusted as valid: any module the spec models import must change
    the key when it changes (fields.py, with every bound, was left out)."""
    import ast

    from specs import cache

    root = Path(loader.__file__).parent
    todo, seen = ["models.py"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((root / name).read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specs."):
                todo.append(node.module.removeprefix("specs.") + ".py")  # type: ignore[union-attr]
    assert seen <= set(cache._SALTED_MODULES), seen - set(cache._SALTED_MODULES)


def test_a_quoted_bare_number_is_not_a_duration_either(repo: Path) -> None:
    """`walltime: 90` is refused, but `walltime: "90"` was read as 90 minutes (Slurm's plain
    minutes), a third reading of the same digits (user trial): refused the same way."""
    head = "apiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: x}\n"
    write(repo, "w.yaml", f'{head}spec: {{project: chem, walltime: "90"}}\n')
    found = single(repo)
    assert (found.line, found.field) == (4, "spec.walltime")
    assert found.message.startswith("90 has no unit (minutes? seconds?); write 90m, 90s"), found


def test_a_bare_half_life_is_told_in_days(repo: Path) -> None:
    """`halfLife: 14` was told "write 14m or 14s": a fair-share half-life is days, not the
    minutes or seconds of a walltime (user trial)."""
    head = "apiVersion: controlplane/v1\nkind: Project\nmetadata: {name: bio}\n"
    write(repo, "p.yaml", f"{head}spec: {{fairshare: {{halfLife: 14}}}}\n")
    found = single(repo)
    assert found.field == "spec.fairshare.halfLife"
    assert found.message.startswith("14 has no unit; write 14d, 14h or 14m"), found.message
