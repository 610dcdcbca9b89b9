"""A new SQLite store comes into being whole: a first command interrupted while it made
the store's tables left an empty database file, and every later command refused it as a
store "emptied, or never initialised" until `cp store init` was run (found by hand: an
apply interrupted at 0.8 s on the quick start)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import SQLModel

from controlplane.errors import StoreError
from controlplane.store import Store


def test_a_store_interrupted_while_it_is_made_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ".cp" / "controlplane.db"
    make = SQLModel.metadata.create_all

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the tables are made

    monkeypatch.setattr(SQLModel.metadata, "create_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Store(f"sqlite:///{path}", create_dir=True)
    monkeypatch.setattr(SQLModel.metadata, "create_all", make)
    with Store(f"sqlite:///{path}", create_dir=True) as store:  # the next command
        assert store.last_applied_plan() is None


def test_a_store_emptied_since_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "controlplane.db"
    Store(f"sqlite:///{path}", create_dir=True).close()
    path.write_bytes(b"")  # emptied: not a store to replace silently
    with pytest.raises(StoreError, match="no controlplane tables"):
        Store(f"sqlite:///{path}", create_dir=True)
