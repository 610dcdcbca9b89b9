"""What every cross-document check reads: the desired state, the documents that failed to
load (not reported twice), the GPU types declared, and where to anchor a diagnostic."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from specs.desired import DesiredState, SourceRef
from specs.diagnostics import Diagnostic, Severity

_NOWHERE = SourceRef("<unknown>")


@dataclass(frozen=True)
class CheckContext:
    desired: DesiredState
    broken: frozenset[tuple[str, str]]
    gpu_types: frozenset[str]  # declared by any cluster

    def at(
        self, kind: str, name: str, field: str, message: str, severity: Severity = "error"
    ) -> Diagnostic:
        ref = self.desired.sources.get((kind, name), _NOWHERE)
        return Diagnostic(ref.path, ref.line, ref.column, message, field, severity)

    def known(self, kind: str, name: str, declared: Collection[str]) -> bool:
        """Declared, or declared by a document that failed to load (already reported)."""
        return name in declared or (kind, name) in self.broken

    @property
    def clusters_complete(self) -> bool:
        """False when some Cluster failed to load: gpuTypes and pools are then unknowable."""
        return not any(kind == "Cluster" for kind, _ in self.broken)
