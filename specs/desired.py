"""DesiredState: every validated spec document of a spec repo, indexed by kind and name."""

from __future__ import annotations

from dataclasses import dataclass, field

from specs.models import Cluster, Department, Project, Workload


@dataclass(frozen=True, order=True)
class SourceRef:
    """Where a document (or one of its fields) was written: ``path:line:column``, 1-based."""

    path: str
    line: int = 1
    column: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True)
class DesiredState:
    clusters: dict[str, Cluster] = field(default_factory=dict)
    departments: dict[str, Department] = field(default_factory=dict)
    projects: dict[str, Project] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)  # keyed by project/name
    sources: dict[tuple[str, str], SourceRef] = field(default_factory=dict)  # (kind, name)
    digest: str = ""  # hash of what the documents say (loader.specs_digest), in every plan

    def source(self, kind: str, name: str) -> SourceRef | None:
        return self.sources.get((kind, name))

    def put(self, doc: Document, ref: SourceRef) -> None:
        """Make ``doc`` (written at ``ref``) the document of its kind and name: while the
        state is being assembled, before anything else reads it."""
        name = document_name(doc)
        self.sources[(doc.kind, name)] = ref
        if isinstance(doc, Cluster):
            self.clusters[name] = doc
        elif isinstance(doc, Department):
            self.departments[name] = doc
        elif isinstance(doc, Project):
            self.projects[name] = doc
        else:
            self.workloads[name] = doc

    def gpu_prices(self) -> dict[tuple[str, str], float]:
        """(cluster, GPU type) -> cost per GPU-hour, as the specs say now."""
        return {
            (name, gpu_type): t.cost_per_gpu_hour
            for name, c in self.clusters.items()
            for gpu_type, t in c.spec.gpu_types.items()
        }

    def with_document(self, doc: Document, ref: SourceRef) -> DesiredState:
        """A copy in which ``doc`` stands for its kind and name instead."""
        copy = DesiredState(
            dict(self.clusters),
            dict(self.departments),
            dict(self.projects),
            dict(self.workloads),
            dict(self.sources),
            self.digest,
        )
        copy.put(doc, ref)
        return copy


Document = Cluster | Department | Project | Workload


def document_name(doc: Document) -> str:
    """What a document is known by: its name, or ``project/name`` for a workload."""
    return doc.key if isinstance(doc, Workload) else doc.metadata.name
