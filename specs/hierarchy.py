"""The department/project tree as a networkx DiGraph (edges point from parent to child).

Node ids are ``department:NAME`` and ``project:NAME`` so that a department and a project
may share a name; a synthetic ``root`` node holds every top-level entry. Each node
carries ``kind``, ``name``, the effective ``quota`` (a per-GPU-type list summed), the
list itself as ``per_type`` (None for a plain quota) and ``rank``.
"""

from __future__ import annotations

import networkx as nx

from specs.desired import DesiredState
from specs.models import total_quota

ROOT = "root"


def department_id(name: str) -> str:
    return f"department:{name}"


def project_id(name: str) -> str:
    return f"project:{name}"


def build_tree(desired: DesiredState) -> nx.DiGraph:
    """Build the tree. Unknown parents attach to ``root`` (the validator reports them)."""
    g = nx.DiGraph()
    g.add_node(ROOT, kind="root", name="", quota=None, per_type=None, rank=0)
    for name, dept in desired.departments.items():
        g.add_node(
            department_id(name),
            kind="department",
            name=name,
            quota=total_quota(dept.spec.quota),
            per_type=dept.spec.quota if isinstance(dept.spec.quota, list) else None,
            rank=dept.spec.rank,
        )
    for name, proj in desired.projects.items():
        g.add_node(
            project_id(name),
            kind="project",
            name=name,
            quota=total_quota(proj.spec.quota),
            per_type=proj.spec.quota if isinstance(proj.spec.quota, list) else None,
            rank=proj.spec.rank,
        )
    for name, dept in desired.departments.items():
        parent = dept.spec.parent
        src = department_id(parent) if parent and parent in desired.departments else ROOT
        g.add_edge(src, department_id(name))
    for name, proj in desired.projects.items():
        parent = proj.spec.department
        src = department_id(parent) if parent and parent in desired.departments else ROOT
        g.add_edge(src, project_id(name))
    return g


def department_cycles(desired: DesiredState) -> list[list[str]]:
    """Department names on each parent cycle (a cycle detaches from the root)."""
    g = nx.DiGraph()
    for name, dept in desired.departments.items():
        g.add_node(name)
        if dept.spec.parent and dept.spec.parent in desired.departments:
            g.add_edge(dept.spec.parent, name)
    return [sorted(c) for c in nx.simple_cycles(g)]


def ancestors(tree: nx.DiGraph, node: str) -> list[str]:
    """The chain from ``node``'s parent up to (excluding) the root, nearest first."""
    chain = []
    preds = list(tree.predecessors(node))
    while preds and preds[0] != ROOT:
        chain.append(preds[0])
        preds = list(tree.predecessors(preds[0]))
    return chain
