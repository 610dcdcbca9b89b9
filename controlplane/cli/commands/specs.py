"""``cp validate`` and ``cp schema``: the specs alone, no cluster involved."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from controlplane.cli.app import (
    DirArg,
    JsonOpt,
    app,
    examples,
    load,
    out,
    output_file,
    write_json,
)
from controlplane.cli.views.problems import diagnostic_json
from controlplane.cli.views.words import counted


@app.command(epilog=examples("cp validate examples/quickstart", "cp validate . --json"))
def validate(spec_dir: DirArg = Path("."), as_json: JsonOpt = False) -> None:
    """Load and check every spec; report all problems at once as file:line:col.

    With --json: "valid": true with the counts and the warnings, or on errors "valid":
    false with every diagnostic (path, line, column, severity, field, message), exit 1."""
    loaded = load(spec_dir)
    d = loaded.desired
    counts = {
        "clusters": len(d.clusters),
        "departments": len(d.departments),
        "projects": len(d.projects),
        "workloads": len(d.workloads),
    }
    if as_json:
        warnings = [diagnostic_json(w) for w in loaded.warnings]
        write_json({"ok": True, "valid": True, **counts, "warnings": warnings})
    else:
        out.print("[green]valid[/]: " + ", ".join(counted(v, k[:-1]) for k, v in counts.items()))


@app.command(epilog=examples("cp schema --out spec.schema.json"))
def schema(
    output: Annotated[
        Path | None, typer.Option("--out", help="write to this file", callback=output_file)
    ] = None,
) -> None:
    """Print the JSON Schema of spec documents (for editors: yaml-language-server)."""
    from specs.schema import json_schema

    text = json.dumps(json_schema(), indent=2)
    if output:
        output.write_text(text + "\n")
    else:
        sys.stdout.write(text + "\n")
