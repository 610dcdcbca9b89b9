"""Cross-document checks, through load_specs (exact positions) and validate() directly."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.desired import DesiredState
from specs.diagnostics import Diagnostic, SpecError
from specs.loader import load_specs
from specs.models import KINDS, Cluster, Department, Project, Workload
from specs.validate import validate
from tests.builders import cluster, department, document, pool, project, workload
from tests.builders.files import dump, position
from tests.builders.specs import Doc


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root: Path, relative: str, *docs: Doc) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(*docs))
    return path


def errors(root: Path) -> list[Diagnostic]:
    with pytest.raises(SpecError) as caught:
        load_specs(root)
    return caught.value.diagnostics


def single(root: Path) -> Diagnostic:
    found = errors(root)
    assert len(found) == 1, [str(d) for d in found]
    return found[0]


def org(root: Path, *docs: Doc) -> None:
    """The base cluster, department and project in org.yaml, plus ``docs`` in w.yaml."""
    write(root, "org.yaml", cluster("rivanna"), department(), project(department="science"))
    if docs:
        write(root, "w.yaml", *docs)


def at(path: Path, needle: str, occurrence: int = 1, offset: int = 0) -> tuple[str, int, int]:
    return (path.name, *position(path, needle, occurrence, offset=offset))


def where(found: Diagnostic) -> tuple[str, int, int]:
    return found.path, found.line, found.column


# ----------------------------------------------------------------------- references


def test_unknown_project(repo: Path) -> None:
    org(repo, workload(project="chemm"))
    found = single(repo)
    assert where(found) == at(repo / "w.yaml", "chemm")
    assert found.field == "spec.project"
    assert found.message == (
        "unknown project 'chemm' (did you mean 'chem'?); declare it (kind: Project) or fix the name"
    )


def test_unknown_node_pool(repo: Path) -> None:
    org(repo, workload(nodePools=["a100", "v10"]))
    found = single(repo)
    assert where(found) == at(repo / "w.yaml", "v10")
    assert found.field == "spec.nodePools.1"
    assert found.message == (
        "unknown node pool 'v10' (did you mean 'v100'?); declared pools: a100, v100"
    )


def test_unknown_department_and_parent(repo: Path) -> None:
    org(repo, department("physics", parent="sciense"), project("bio", department="lifesci"))
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(repo / "w.yaml", "sciense"), "spec.parent"),
        (at(repo / "w.yaml", "lifesci"), "spec.department"),
    ]
    assert "(did you mean 'science'?)" in found[0].message


def test_department_cycle_reported_once(repo: Path) -> None:
    org(repo, department("a", parent="c"), department("b", parent="a"), department("c", parent="b"))
    found = single(repo)
    assert where(found) == at(repo / "w.yaml", "parent: c", offset=len("parent: "))
    assert found.field == "spec.parent"
    assert found.message.startswith("department parents form a cycle (a -> c -> b -> a)")


def test_duplicate_workload_names_both_positions(repo: Path) -> None:
    org(repo, workload("md-run"))
    other = write(repo, "z/more.yaml", workload("other"), workload("md-run", gpus=1))
    found = single(repo)
    first = position(repo / "w.yaml", "md-run")
    assert where(found) == ("z/more.yaml", *position(other, "md-run"))
    assert found.field == "metadata.name"
    assert found.message == (
        f"Workload 'chem/md-run' is already defined in the same project at w.yaml:{first[0]}:{first[1]}; "
        "rename or remove one"
    )


def test_a_duplicate_documents_own_errors_come_with_the_duplicate_error(repo: Path) -> None:
    """Not one error now and the duplicate's own after its name is fixed: a second Cluster
    'rivanna' with a pool of an undeclared GPU type gets both at once, and a duplicate
    workload's unknown cluster too; the first documents stand and are not blamed."""
    org(repo, workload("md-run"))
    write(
        repo,
        "z.yaml",  # read after org.yaml and w.yaml: its documents are the duplicates
        cluster("rivanna", pools=[pool("h", gpu_type="h200")]),
        workload("md-run", clusters=["nowhere"]),
    )
    found = errors(repo)
    more = repo / "z.yaml"
    assert [(where(d), d.field) for d in found] == [
        (at(more, "rivanna"), "metadata.name"),
        (at(more, "h200"), "spec.nodePools.0.gpuType"),
        (at(more, "md-run"), "metadata.name"),
        (at(more, "nowhere"), "spec.clusters.0"),
    ]
    assert "unknown gpuType 'h200'" in found[1].message
    assert "'nowhere'" in found[3].message


def test_duplicates_are_checked_each_on_its_own(repo: Path) -> None:
    """A duplicate Cluster declaring only h200 does not make a duplicate workload's a100_80
    unknown: the first Cluster stands, and each duplicate is checked alone against it."""
    org(repo, workload("md-run"))
    write(
        repo,
        "z.yaml",
        cluster(
            "rivanna", gpu_types={"h200": {"memoryGiB": 141}}, pools=[pool("h", gpu_type="h200")]
        ),
        workload("md-run", gpuTypes=["a100_80"]),
    )
    found = errors(repo)
    assert [d.field for d in found] == ["metadata.name", "metadata.name"], [str(d) for d in found]


def test_a_duplicate_that_fails_its_schema_is_reported_as_a_duplicate_too(repo: Path) -> None:
    """A second Project 'chem' with a negative quota gets its schema error and the
    duplicate error at once, not the duplicate only once the quota is fixed; and where
    the broken document comes first, the valid one after it is the duplicate."""
    org(repo, project("chem", gpus=-4, department="science"))
    found = errors(repo)
    w = repo / "w.yaml"
    assert [d.field for d in found] == ["metadata.name", "spec.quota.gpus"], [str(d) for d in found]
    assert where(found[0]) == at(w, "chem")
    assert found[0].message.startswith("Project 'chem' is already defined at org.yaml:")
    write(repo, "a.yaml", project("chem", gpus=-1, department="science"))  # read first
    found = errors(repo)
    assert [(d.path, d.field) for d in found] == [
        ("a.yaml", "spec.quota.gpus"),
        ("org.yaml", "metadata.name"),
        ("w.yaml", "metadata.name"),
        ("w.yaml", "spec.quota.gpus"),
    ], [str(d) for d in found]
    assert found[1].message.startswith("Project 'chem' is already defined at a.yaml:")


def test_same_workload_name_in_two_projects_is_fine(repo: Path) -> None:
    org(
        repo,
        project("bio", department="science"),
        workload("md-run"),
        workload("md-run", project="bio"),
    )
    assert set(load_specs(repo).desired.workloads) == {"chem/md-run", "bio/md-run"}


def test_duplicate_project(repo: Path) -> None:
    org(repo, project("chem", gpus=2, department="science"))
    found = single(repo)
    assert where(found) == at(repo / "w.yaml", "chem")
    assert found.message.startswith("Project 'chem' is already defined at org.yaml:")


def test_unknown_cluster(repo: Path) -> None:
    org(repo, workload(clusters=["rivanna", "rivana2"]))
    found = single(repo)
    assert where(found) == at(repo / "w.yaml", "rivana2")
    assert found.field == "spec.clusters.1"
    assert (
        found.message
        == "unknown cluster 'rivana2' (did you mean 'rivanna'?); declared clusters: rivanna"
    )


def test_unknown_gpu_type_in_workload_and_pool(repo: Path) -> None:
    write(
        repo,
        "org.yaml",
        cluster("rivanna", pools=[pool(), pool("h100", gpu_type="h100")]),
        department(),
        project(department="science"),
    )
    write(repo, "w.yaml", workload(gpuTypes=["a100_80", "a100_40"]))
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (
            at(repo / "org.yaml", "gpuType: h100", offset=len("gpuType: ")),
            "spec.nodePools.1.gpuType",
        ),
        (at(repo / "w.yaml", "a100_40"), "spec.gpuTypes.1"),
    ]
    assert found[0].message.startswith(
        "unknown gpuType 'h100'; declare it under this cluster's spec.gpuTypes"
    )
    assert found[1].message.startswith(
        "unknown gpuType 'a100_40' (did you mean 'a100_80'?); gpuTypes are declared"
    )


def test_quota_list_with_unknown_and_repeated_gpu_types(repo: Path) -> None:
    org(
        repo,
        document(
            "Project",
            "bio",
            {
                "quota": [
                    {"gpuType": "v100", "gpus": 2},
                    {"gpuType": "h100", "gpus": 2},
                    {"gpuType": "v100", "gpus": 1},
                ]
            },
        ),
    )
    found = errors(repo)
    path = repo / "w.yaml"
    assert [(where(d), d.field) for d in found] == [
        (at(path, "h100"), "spec.quota.1.gpuType"),
        (at(path, "v100", 2), "spec.quota.2.gpuType"),
    ]
    assert found[0].message.startswith("unknown gpuType 'h100'")
    assert found[1].message == "gpuType 'v100' already has a quota (entry 0); merge the two entries"


def test_duplicate_pool_names(repo: Path) -> None:
    write(repo, "org.yaml", cluster("rivanna", pools=[pool("a100"), pool("a100", gpus_per_node=4)]))
    found = single(repo)
    assert where(found) == at(repo / "org.yaml", "name: a100", 2, offset=len("name: "))
    assert found.field == "spec.nodePools.1.name"
    assert found.message == (
        "node pool 'a100' is already defined (spec.nodePools.0); pool names must be unique within a cluster"
    )


# ----------------------------------------------------------------------- fit and limits


def test_workload_that_fits_no_pool_names_the_closest(repo: Path) -> None:
    org(repo, workload(gpus=16))
    found = single(repo)
    assert where(found) == at(repo / "w.yaml", "gpus: 16", offset=len("gpus: "))
    assert found.field == "spec.gpus"
    assert found.message == (
        "no node pool can ever hold this workload (one replica needs 16 GPUs on one node); "
        "the closest is rivanna/a100, but it has 8 GPUs per node, fewer than the 16 each replica needs"
    )


def test_each_workload_asking_alike_gets_its_own_fit_error(repo: Path) -> None:
    """The fit verdict is worked out once per distinct ask; every workload still gets its
    diagnostic, and an ask that differs only in GPU type is judged afresh."""
    org(
        repo,
        workload("a", gpus=16),
        workload("b", gpus=16),
        workload("c", gpus=8),
        workload("d", gpus=8, gpuTypes=["v100"]),
        workload("e", gpus=16, walltime="1h"),
    )
    w = repo / "w.yaml"

    def line(needle: str, occurrence: int = 1) -> int:
        return at(w, needle, occurrence)[1]

    assert sorted((d.line, d.field) for d in errors(repo)) == [
        (line("gpus: 16", 1), "spec.gpus"),  # a
        (line("gpus: 16", 2), "spec.gpus"),  # b, asking as a does
        (line("gpus: 8", 2), "spec.gpus"),  # d, asking as c (which fits) but for v100
        (line("gpus: 16", 3), "spec.gpus"),  # e
    ]


def test_fit_honours_gpu_memory(repo: Path) -> None:
    org(repo, workload(minGpuMemoryGiB=100))
    found = single(repo)
    assert found.field == "spec.minGpuMemoryGiB"
    assert "rivanna/a100, but its GPUs have 80 GiB, below minGpuMemoryGiB 100" in found.message


def test_fit_honours_allowed_gpu_types(repo: Path) -> None:
    org(repo, workload(gpus=8, gpuTypes=["v100"]))
    found = single(repo)
    # the closest pool is one the workload chose (its gpuTypes), and why that one cannot
    assert found.field == "spec.gpus"
    assert "closest is rivanna/v100, but it has 4 GPUs per node, fewer than the 8" in (
        found.message
    )


@pytest.mark.parametrize("choice", [{"nodePools": ["v100"]}, {"gpuTypes": ["v100"]}])
def test_fit_honours_the_pools_a_workload_chose(repo: Path, choice: dict[str, list[str]]) -> None:
    """With nodePools [v100] (maxWalltime 20m) and walltime 2h, validation passed (a100,
    which it did not choose, could hold it), and the plan said only "no-eligible-pool";
    with gpuTypes [v100], the error blamed a100's GPU type, not the walltime (user trial)."""
    write(
        repo,
        "org.yaml",
        cluster(
            "rivanna",
            pools=[pool(), pool("v100", gpu_type="v100", gpus_per_node=4, maxWalltime="20m")],
        ),
        department(),
        project(department="science"),
    )
    write(repo, "w.yaml", workload(gpus=2, walltime="2h", **choice))
    found = single(repo)
    assert found.field == "spec.walltime"
    assert "closest is rivanna/v100, but its maxWalltime 20m is shorter than walltime 2h" in (
        found.message
    )


def test_fit_honours_pool_walltime(repo: Path) -> None:
    write(
        repo,
        "org.yaml",
        cluster("rivanna", pools=[pool(maxWalltime="1d")]),
        department(),
        project(department="science"),
    )
    write(repo, "w.yaml", workload(walltime="2d"))
    found = single(repo)
    assert found.field == "spec.walltime"
    assert "its maxWalltime 1d is shorter than walltime 2d" in found.message


def test_fitting_workloads_pass(repo: Path) -> None:
    org(
        repo, workload("a", gpus=8), workload("b", gpus=4, gpuTypes=["v100"]), workload("c", gpus=0)
    )
    assert len(load_specs(repo).desired.workloads) == 3


def test_walltime_over_project_limit(repo: Path) -> None:
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(),
        project(department="science", maxWalltime="7d"),
    )
    write(repo, "w.yaml", workload(walltime="8d"))
    found = single(repo)
    assert where(found) == at(repo / "w.yaml", "8d")
    assert found.field == "spec.walltime"
    assert found.message.startswith("walltime 8d exceeds project 'chem' maxWalltime 7d")


@pytest.mark.parametrize("sibling", [6, 0], ids=["overcommitted", "not-overcommitted"])
def test_non_preemptible_demand_above_a_department_is_a_warning(repo: Path, sibling: int) -> None:
    """Non-preemptible work runs only within deserved on every level: demand above a
    department's deserved means some of it waits, as a single workload bigger than its
    project waits. It was an error, blocking every project's plans, only while the
    department's children deserved more than it (adding an empty project to it broke the
    repo: user trial), and nothing at all otherwise. A warning, either way."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(gpus=8),
        project("chem", gpus=6, department="science"),
        project("bio", gpus=sibling, department="science"),
    )
    write(
        repo,
        "w.yaml",
        workload("serve-a", type="inference", gpus=3, replicas=2),
        workload("serve-b", project="bio" if sibling else "chem", type="inference", gpus=4),
    )
    [found] = [w for w in load_specs(repo).warnings if "non-preemptible" in w.message]
    assert (found.severity, found.field) == ("warning", "spec.quota.gpus")
    assert where(found) == at(repo / "org.yaml", "gpus: 8", offset=len("gpus: "))
    assert found.message.startswith(
        "the non-preemptible workloads under department 'science' need 10 GPUs (gpus x "
        "minReplicas) but it deserves only 8"
    ), found.message
    assert "raise quota.gpus to at least 10" in found.message


def test_overcommitted_department_is_a_warning_with_preemptible_work(repo: Path) -> None:
    """Allowed (KAI shares the department's quota among its children), but the children
    cannot all get their deserved quota at once: a warning, at the department's quota."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(gpus=8),
        project("chem", gpus=6, department="science"),
        project("bio", gpus=6, department="science"),
    )
    write(
        repo,
        "w.yaml",
        workload("train", gpus=8, replicas=4),
        workload("serve", project="bio", type="inference", gpus=4, preemptible=True),
    )
    (warning,) = load_specs(repo).warnings
    assert (warning.severity, warning.field) == ("warning", "spec.quota.gpus")
    assert where(warning) == at(repo / "org.yaml", "gpus: 8", offset=len("gpus: "))
    assert warning.message.startswith(
        "its children deserve 12 GPUs together (bio 6, chem 6), more than department "
        "'science' deserves (8)"
    )


def test_a_department_overcommitted_and_short_for_non_preemptible_work_warns_of_both(
    repo: Path,
) -> None:
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(gpus=8),
        project("chem", gpus=6, department="science"),
        project("bio", gpus=6, department="science"),
    )
    write(repo, "w.yaml", workload("serve", project="bio", type="inference", gpus=6, replicas=2))
    found = [w for w in load_specs(repo).warnings if w.field == "spec.quota.gpus"]
    assert len(found) == 2
    assert any(w.message.startswith("its children deserve 12 GPUs") for w in found)
    assert any("non-preemptible workloads under department" in w.message for w in found)


def test_a_quota_above_what_the_clusters_hold_is_a_warning(repo: Path) -> None:
    # the builders' cluster: 4 x 8 a100_80 and 8 x 4 v100, 64 GPUs
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(gpus=100),
        project("chem", gpus=8, department="science"),
        project(
            "bio",
            gpus=0,
            department="science",
            quota=[{"gpuType": "v100", "gpus": 40}, {"gpuType": "a100_80", "gpus": 8}],
        ),
    )
    found = {w.field: w for w in load_specs(repo).warnings}
    dept = found["spec.quota.gpus"]
    assert where(dept) == at(repo / "org.yaml", "gpus: 100", offset=len("gpus: "))
    assert dept.message.startswith("deserved 100 GPUs, but the clusters hold 64 GPUs")
    v100 = found["spec.quota.0.gpus"]
    assert where(v100) == at(repo / "org.yaml", "gpus: 40", offset=len("gpus: "))
    assert v100.message.startswith("deserved 40 v100 GPUs, but the clusters hold only 32")
    assert "spec.quota.1.gpus" not in found, "8 of 32 a100_80 fit"


def test_top_level_quotas_adding_up_above_the_clusters_is_a_warning(repo: Path) -> None:
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department("science", gpus=40),
        department("arts", gpus=30),
        project("chem", gpus=8, department="science"),
    )
    (warning,) = load_specs(repo).warnings
    assert where(warning) == at(repo / "org.yaml", "gpus: 40", offset=len("gpus: "))
    assert warning.message.startswith(
        "the top-level deserved quotas add up to 70 GPUs (arts 30, science 40), "
        "but the clusters hold 64 GPUs"
    )


def test_no_capacity_warning_when_the_specs_do_not_say(repo: Path) -> None:
    """A real cluster's pools need not declare ``nodes``: its capacity is observed."""
    unknown = [pool(), pool("v100", gpu_type="v100", gpus_per_node=4, nodes=0)]
    write(
        repo,
        "org.yaml",
        cluster("rivanna", adapter="slurm", pools=unknown),
        department(gpus=1000),
        project("chem", gpus=8, department="science"),
    )
    assert load_specs(repo).warnings == []


def test_non_preemptible_workload_over_deserved_is_a_warning(repo: Path) -> None:
    org(repo, workload("serve", type="inference", gpus=4, replicas=3))
    result = load_specs(repo)
    (warning,) = result.warnings
    assert (warning.severity, warning.field) == ("warning", "spec.gpus")
    assert where(warning) == at(repo / "w.yaml", "gpus: 4", offset=len("gpus: "))
    assert (
        "needs 12 GPUs (gpus x minReplicas) but project 'chem' deserves only 8" in warning.message
    )


def test_a_gang_above_its_projects_limit_is_a_warning(repo: Path) -> None:
    """A preemptible gang of 5 x 8 GPUs under a project limit of 32 was planned as an
    ordinary ``over-limit`` wait, whose remedy (wait for other work of the project to
    finish) can never help, and ``cp validate`` said nothing. It can never start."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(),
        project(department="science", limit=24),
    )
    write(repo, "w.yaml", workload("big-gang", gpus=8, replicas=4))
    (warning,) = load_specs(repo).warnings
    assert (warning.severity, warning.field) == ("warning", "spec.replicas")
    assert where(warning) == at(repo / "w.yaml", "replicas: 4", offset=len("replicas: "))
    assert warning.message.startswith(
        "this workload needs 32 GPUs at once (gpus x replicas) but project 'chem' may hold "
        "at most 24 (quota.limit): it can never start"
    ), warning.message
    assert "shrink it" in warning.message and "raise that limit" in warning.message


def test_an_elastic_gang_above_a_departments_limit_is_a_warning(repo: Path) -> None:
    """The minimum of an elastic gang is what must fit; a limit on any level above counts."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(gpus=8, limit=12),
        project(department="science"),
    )
    write(
        repo,
        "w.yaml",
        workload("elastic", gpus=4, replicas=6, minReplicas=4),
        workload("fits", gpus=4, replicas=6, minReplicas=3),  # grows beyond: fine
    )
    (warning,) = load_specs(repo).warnings
    assert (warning.field, where(warning)) == (
        "spec.minReplicas",
        at(repo / "w.yaml", "minReplicas: 4", offset=len("minReplicas: ")),
    )
    assert warning.message.startswith(
        "this workload needs 16 GPUs at once (gpus x minReplicas) but department 'science', "
        "above project 'chem', may hold at most 12 (quota.limit): it can never start"
    ), warning.message


def test_a_gang_bigger_than_every_pool_it_may_use_is_a_warning(repo: Path) -> None:
    """A gang is placed inside one pool: 9 x 4 v100 GPUs never fit 8 nodes of 4."""
    org(repo, workload("wide", gpus=4, replicas=9, gpuTypes=["v100"]))
    (warning,) = load_specs(repo).warnings
    assert (warning.severity, warning.field) == ("warning", "spec.replicas")
    assert warning.message.startswith(
        "this workload needs 36 GPUs at once (gpus x replicas) inside one node pool, but the "
        "largest it may use, rivanna/v100, has 32 (8 nodes x 4): it can never start"
    ), warning.message


def test_no_gang_warning_when_a_pool_does_not_declare_its_nodes(repo: Path) -> None:
    """Real clusters need not declare ``nodes``: their size is observed, not known here."""
    unknown = [pool(), pool("v100", gpu_type="v100", gpus_per_node=4, nodes=0)]
    write(
        repo,
        "org.yaml",
        cluster("rivanna", adapter="slurm", pools=unknown),
        department(),
        project(department="science"),
    )
    write(repo, "w.yaml", workload("wide", gpus=4, replicas=9, gpuTypes=["v100"]))
    assert load_specs(repo).warnings == []


# ----------------------------------------------------------------------- one error, not a cascade


def test_broken_documents_do_not_cascade(repo: Path) -> None:
    write(
        repo,
        "org.yaml",
        cluster("rivanna", adapter="slrum"),
        department(),
        project(gpus=-1, department="science"),
    )
    write(
        repo,
        "w.yaml",
        *[workload(f"w{i}", clusters=["rivanna"], gpuTypes=["v100"]) for i in range(5)],
    )
    assert [d.field for d in errors(repo)] == ["spec.adapter", "spec.quota.gpus"]


def test_a_broken_documents_own_references_come_with_its_schema_errors(repo: Path) -> None:
    """An unknown key and an unknown project in one workload: both at once. The project
    error used to come only once the key was fixed (user trial). Only the references of
    the fields that are valid are checked: a value that failed its schema is not judged
    again under its default."""
    org(
        repo,
        workload("a", project="chemm", walltme="1h"),
        workload("b", clusters=["rivana"], gpus=-3),
    )
    w = repo / "w.yaml"
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(w, "chemm"), "spec.project"),
        (at(w, "walltme"), "spec.walltme"),
        (at(w, "-3"), "spec.gpus"),
        (at(w, "rivana"), "spec.clusters.0"),
    ], [str(d) for d in found]
    assert "did you mean 'chem'?" in found[0].message
    assert "did you mean 'rivanna'?" in found[3].message


def test_a_workload_without_its_project_still_has_its_references_checked(repo: Path) -> None:
    """A required field that failed left nothing to check the rest against: a workload
    without ``project`` got no word on its unknown cluster and GPU type until the project
    was added (user trial). A stand-in project (never judged itself) lets them come now."""
    lost = workload("c", clusters=["rivana"], gpuTypes=["h999"])
    del lost["spec"]["project"]
    org(repo, lost, workload("d", project=7, clusters=["nowhere"]))  # type: ignore[arg-type]
    w = repo / "w.yaml"
    found = errors(repo)
    assert [d.field for d in found] == [
        "spec.project",  # missing
        "spec.clusters.0",
        "spec.gpuTypes.0",
        "spec.project",  # not a string
        "spec.clusters.0",
    ], [str(d) for d in found]
    assert [where(d) for d in found if d.field != "spec.project"] == [
        at(w, "rivana"),
        at(w, "h999"),
        at(w, "nowhere"),
    ]
    assert not any("no-project" in d.message for d in found), "the stand-in is never shown"


def test_a_document_with_a_bad_name_still_has_its_references_checked(repo: Path) -> None:
    """``metadata: {name: W6}`` with an unknown project and GPU type gave only the name's
    error; the other two came once it was fixed (user trial). A stand-in name (never
    shown) lets them come at once."""
    bad = workload("W6", project="nope", gpuTypes=["zzz"])
    org(repo, bad, project("Lab_1", department="nosuch"))
    w = repo / "w.yaml"
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(w, "W6"), "metadata.name"),
        (at(w, "nope"), "spec.project"),
        (at(w, "zzz"), "spec.gpuTypes.0"),
        (at(w, "Lab_1"), "metadata.name"),
        (at(w, "nosuch"), "spec.department"),
    ], [str(d) for d in found]
    assert not any("invalid-name" in d.message for d in found), "the stand-in is never shown"
    # the same mistake at the same place of another file: its references come at once too
    (repo / "v.yaml").write_text((repo / "w.yaml").read_text().replace("Lab_1", "Lab_2"))
    again = [(d.path, d.field) for d in errors(repo) if d.field == "spec.department"]
    assert sorted(again) == [("v.yaml", "spec.department"), ("w.yaml", "spec.department")]


def test_checks_across_fields_come_with_the_field_errors(repo: Path) -> None:
    """``cp validate`` promises every error at once, but a workload with a bad field kept
    back its checks across fields (minReplicas against replicas, the checkpoint grace
    against the walltime) until that field was fixed, and gave only the first of the two
    (user trial). A check whose other field failed is not judged against its default."""
    org(
        repo,
        workload(
            "a", gpus=-2, replicas=2, minReplicas=5, walltime="1h", checkpoint={"grace": "2h"}
        ),
        workload("b", replicas="many", minReplicas=3, walltime="nope", checkpoint={"grace": "2h"}),
        workload("c", replicas=2, minReplicas=3, walltime="1h", checkpoint={"grace": "1h"}),
    )
    w = repo / "w.yaml"
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(w, "-2"), "spec.gpus"),
        (at(w, "5"), "spec.minReplicas"),
        (at(w, "2h"), "spec.checkpoint.grace"),  # both checks, not the first
        (at(w, "many"), "spec.replicas"),
        (at(w, "nope"), "spec.walltime"),
        (at(w, "3", 2), "spec.minReplicas"),
        (at(w, "grace: 1h", 1, 7), "spec.checkpoint.grace"),
    ], [str(d) for d in found]
    assert "minReplicas 5 exceeds replicas 2" in found[1].message
    assert "grace (2h) must be shorter than the walltime (1h)" in found[2].message


def test_one_bad_pool_field_leaves_the_clusters_other_errors_and_references_checked(
    repo: Path,
) -> None:
    """One bad field of a node pool (``nodes: -4``) hid the cluster's other errors (a
    duplicate pool name, an unknown gpuType) and a workload's unknown pool until it was
    fixed (user trial): the whole ``nodePools`` was left out of the cluster's shadow. Only
    the failed field is now, at its default; the pools and their names stand."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna", pools=[pool(), pool(gpu_type="x200", gpus_per_node=4, nodes=-4)]),
        department(),
        project(department="science"),
    )
    write(repo, "w.yaml", workload("np", nodePools=["h100"]))
    o, w = repo / "org.yaml", repo / "w.yaml"
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(o, "name: a100", 2, offset=len("name: ")), "spec.nodePools.1.name"),
        (at(o, "x200"), "spec.nodePools.1.gpuType"),
        (at(o, "-4"), "spec.nodePools.1.nodes"),  # once: its default is not judged
        (at(w, "h100"), "spec.nodePools.0"),
    ], [str(d) for d in found]
    assert [d.message for d in found] == [
        "node pool 'a100' is already defined (spec.nodePools.0); pool names must be unique "
        "within a cluster",
        "unknown gpuType 'x200'; declare it under this cluster's spec.gpuTypes "
        "(declared: a100_80, v100)",
        "must be at least 0, got -4",
        "unknown node pool 'h100'; declared pools: a100",
    ]


def test_a_pool_that_cannot_stand_is_not_judged_again(repo: Path) -> None:
    """A pool whose required field failed (``gpusPerNode: 0``) has no default to stand on:
    its cluster's pools stay unknown, so a workload naming that pool is not told it does
    not exist (one typo, one error). A failed field with a default is reported once."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna", pools=[pool(), pool("h100", gpus_per_node=0, maxWalltime=90)]),
        department(),
        project(department="science"),
    )
    write(repo, "w.yaml", workload("np", nodePools=["h100"], walltime="2h"))
    o = repo / "org.yaml"
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(o, "gpusPerNode: 0", offset=len("gpusPerNode: ")), "spec.nodePools.1.gpusPerNode"),
        (at(o, "90"), "spec.nodePools.1.maxWalltime"),
    ], [str(d) for d in found]


def test_a_check_of_the_whole_pool_does_not_judge_its_failed_field(repo: Path) -> None:
    """A pool whose ``labels`` failed stands at no labels in its cluster's shadow; on
    Kubernetes a check of the whole pool (each of several pools needs labels) would judge
    that default: the failed field is reported, once, and nothing about it."""
    pools = [pool(labels={"gpu": "a100"}), pool("v100", gpu_type="v100", labels={"gpu": 5})]
    write(repo, "org.yaml", cluster("k8s", adapter="kubernetes", pools=pools))
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(repo / "org.yaml", "5"), "spec.nodePools.1.labels.gpu"),
    ], [str(d) for d in found]


def test_a_reference_to_a_name_near_a_broken_document_is_reported_once(repo: Path) -> None:
    """With the shadow of department 'science' declared, the unknown 'sciense' of a
    project that loaded would read differently (did you mean 'science'?): it is the same
    error, reported once."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna"),
        department(rank="high"),
        project(department="sciense"),
    )
    found = errors(repo)
    assert [d.field for d in found] == ["spec.rank", "spec.department"], [str(d) for d in found]


def test_a_quota_gpu_type_is_checked_beside_a_broken_cluster(repo: Path) -> None:
    """The GPU types of a cluster whose pool failed are still known, so a project's quota
    naming one that is not declared comes with the pool's error, not after it."""
    write(
        repo,
        "org.yaml",
        cluster("rivanna", pools=[pool(nodes=-1)]),
        department(),
        document("Project", "bio", {"quota": [{"gpuType": "a100_8", "gpus": 2}]}),
    )
    o = repo / "org.yaml"
    found = errors(repo)
    assert [(where(d), d.field) for d in found] == [
        (at(o, "-1"), "spec.nodePools.0.nodes"),
        (at(o, "gpuType: a100_8\n", offset=len("gpuType: ")), "spec.quota.0.gpuType"),
    ], [str(d) for d in found]
    assert found[1].message.startswith("unknown gpuType 'a100_8' (did you mean 'a100_80'?)")


# ----------------------------------------------------------------------- validate() directly


def state(*docs: Doc) -> DesiredState:
    by_kind: dict[str, dict[str, object]] = {kind: {} for kind in KINDS}
    for doc in docs:
        model = KINDS[doc["kind"]].model_validate(doc)
        name = model.key if isinstance(model, Workload) else model.metadata.name
        by_kind[doc["kind"]][name] = model
    return DesiredState(
        clusters={k: v for k, v in by_kind["Cluster"].items() if isinstance(v, Cluster)},
        departments={k: v for k, v in by_kind["Department"].items() if isinstance(v, Department)},
        projects={k: v for k, v in by_kind["Project"].items() if isinstance(v, Project)},
        workloads={k: v for k, v in by_kind["Workload"].items() if isinstance(v, Workload)},
    )


def test_validate_is_pure_and_works_without_sources() -> None:
    desired = state(
        cluster("rivanna"),
        department(),
        project(department="science"),
        workload(project="nope"),
        workload("big", gpus=64),
    )
    found = validate(desired)
    assert [(d.path, d.field) for d in found] == [
        ("<unknown>", "spec.gpus"),
        ("<unknown>", "spec.project"),
    ]
    assert validate(desired) == found


def test_validate_skips_references_to_broken_documents() -> None:
    desired = state(cluster("rivanna"), workload(project="chem", clusters=["other"]))
    assert validate(desired, broken=[("Project", "chem"), ("Cluster", "other")]) == []


def test_valid_state_has_no_diagnostics() -> None:
    assert (
        validate(state(cluster("rivanna"), department(), project(department="science"), workload()))
        == []
    )


def test_a_project_and_a_department_may_not_share_a_name(repo: Path) -> None:
    """Both are queues of one tree: the quota table showed two 'science' rows and the
    warnings could not tell them apart (user trial)."""
    org(repo, project("science"))
    found = single(repo)
    assert (found.path, found.field) == ("w.yaml", "metadata.name")
    assert "Department 'science'" in found.message and "org.yaml:" in found.message


def test_the_closest_pool_for_a_long_walltime_is_the_one_allowing_the_longest(
    repo: Path,
) -> None:
    """Pools of 3d and 7d and a walltime of 8d: the error named the 3d pool (the bigger
    GPUs won the tie) as the closest (user trial)."""
    write(
        repo,
        "org.yaml",
        cluster(
            "rivanna",
            pools=[
                pool(maxWalltime="3d"),
                pool("v100", gpu_type="v100", gpus_per_node=4, maxWalltime="7d"),
            ],
        ),
        department(),
        project(department="science"),
    )
    write(repo, "w.yaml", workload(gpus=1, walltime="8d"))
    found = single(repo)
    assert "closest is rivanna/v100, but its maxWalltime 7d is shorter than walltime 8d" in (
        found.message
    )


def test_a_gang_above_every_per_type_limit_it_could_use_is_a_warning(repo: Path) -> None:
    """nlp's A100 limit is 8 and llm-finetune (2 x 8, A100 only) can never start; only the
    summed limit (32) was checked, and `cp validate` said nothing (user trial)."""
    chem = project(department="science")
    chem["spec"]["quota"] = [
        {"gpuType": "a100_80", "gpus": 8, "limit": 8},
        {"gpuType": "v100", "gpus": 8, "limit": 24},
    ]
    write(repo, "org.yaml", cluster(), department(), chem)
    write(repo, "w.yaml", workload("big", gpus=8, replicas=2, gpuTypes=["a100_80"]))
    (warning,) = load_specs(repo).warnings
    assert warning.field == "spec.replicas"
    assert "allow a100_80 at most 8 (quota[TYPE].limit): it can never start" in warning.message
    # one that may use V100s too may start there: no warning
    write(repo, "w.yaml", workload("big", gpus=4, replicas=4))
    assert load_specs(repo).warnings == []


@pytest.mark.parametrize("priced", [False, True])
def test_a_cost_budget_nothing_is_priced_against_is_a_warning(repo: Path, priced: bool) -> None:
    """``budget: {costPerMonth: 10}`` where no GPU type has a costPerGpuHour (0 when not
    given) can never be spent: the project ran hundreds of GPU-hours with all of it left,
    and validate said nothing (user trial)."""
    price = {"costPerGpuHour": 2.0} if priced else {}
    types = {"a100_80": {"memoryGiB": 80, **price}, "v100": {"memoryGiB": 32}}
    chem = project("chem", gpus=8)
    chem["spec"]["budget"] = {"costPerMonth": 10}
    write(repo, "org.yaml", cluster("rivanna", gpu_types=types), chem)
    found = [w for w in load_specs(repo).warnings if w.field == "spec.budget.costPerMonth"]
    if priced:  # one priced type is enough: the budget can bind
        assert found == []
        return
    (warning,) = found
    assert where(warning) == at(repo / "org.yaml", "costPerMonth: 10", offset=len("costPerMonth: "))
    assert "no GPU type of the clusters has a price" in warning.message


@pytest.mark.parametrize(
    ("slurm", "message"),
    [
        ({"sshHost": "login1", "exportEnv": ["SCRATCH"]}, "over sshHost, jobs get the login"),
        ({"exportEnv": ["SCRATCH", "SBATCH_PARTITION"]}, "SBATCH_PARTITION would change what"),
        # both at once (trialP: one more run of `cp validate` for each)
        ({"sshHost": "h", "exportEnv": ["SLURM_X"]}, "(set them there); and exportEnv: SLURM_X"),
        # an environment variable's rule, not a name's lowercase one (trialP)
        ({"exportEnv": ["BAD NAME"]}, "'BAD NAME' is not a valid environment variable name"),
    ],
)
def test_export_env_names_only_what_cp_can_pass_on(
    repo: Path, slurm: dict[str, object], message: str
) -> None:
    """A Slurm cluster's exportEnv names variables of cp's own environment that its jobs get
    (the adapter passes nothing else on). Over ssh they are the login node's; and Slurm's own
    would change the options the adapter sets."""
    path = write(repo, "org.yaml", cluster("hpc", adapter="slurm", slurm=slurm), project())
    found = single(repo)
    assert message in found.message
    where = "BAD NAME" if "BAD NAME" in str(slurm) else "slurm:"  # the entry, or the block
    assert (found.path, found.line) == at(path, where)[:2]


def test_a_service_without_walltime_where_pools_stop_it_is_a_warning(repo: Path) -> None:
    """An inference service without walltime was placed in a pool with a 4-hour
    maxWalltime although others had none, submitted with 4 hours, stopped then and counted
    as done, and neither `cp validate` nor `cp plan` had said so (trialO)."""
    pools = [pool("short", maxWalltime="4h"), pool("long", nodes=2)]
    write(repo, "org.yaml", cluster("rivanna", pools=pools), department(), project())
    write(repo, "w.yaml", workload("serve", type="inference", gpus=2))
    (warning,) = load_specs(repo).warnings
    assert (warning.severity, warning.field) == ("warning", "spec.type")
    assert where(warning) == at(repo / "w.yaml", "inference")
    assert "without walltime is stopped after 4h in rivanna/short" in warning.message
    assert "spec.nodePools" in warning.message
    # where it may run, nothing stops it: nothing to say
    write(repo, "w.yaml", workload("serve", type="inference", gpus=2, nodePools=["long"]))
    assert load_specs(repo).warnings == []
    # training work without walltime takes the limit as its walltime, as documented
    write(repo, "w.yaml", workload("train", gpus=2))
    assert load_specs(repo).warnings == []
