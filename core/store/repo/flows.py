"""Flows and their versions: a flow's definition is stored whole, once per change."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from ..db import Database
from ..errors import NotFoundError
from ..models import FlowRow, FlowVersionRow
from .ids import new_id, now


@dataclass(frozen=True)
class FlowVersion:
    id: str
    flow_id: str
    flow_name: str
    version: int
    definition: dict
    structure: str
    note: str
    created_at: float


def _flow_version(row: FlowVersionRow, name: str) -> FlowVersion:
    return FlowVersion(row.id, row.flow_id, name, row.version, row.definition, row.structure, row.note, row.created_at)


def create_flow(db: Database, name: str, definition: dict, structure: str, note: str = "imported") -> FlowVersion:
    with db.session() as s:
        flow = FlowRow(id=new_id(), name=name, created_at=now())
        s.add(flow)
        s.flush()
        row = FlowVersionRow(
            id=new_id(),
            flow_id=flow.id,
            version=1,
            definition=definition,
            structure=structure,
            note=note,
            created_at=now(),
        )
        s.add(row)
        s.flush()
        return _flow_version(row, name)


def add_flow_version(db: Database, flow_id: str, definition: dict, structure: str, note: str = "") -> FlowVersion:
    with db.session() as s:
        flow = s.get(FlowRow, flow_id)
        if flow is None:
            raise NotFoundError(f"no flow with id {flow_id!r}")
        latest = s.scalar(select(func.max(FlowVersionRow.version)).where(FlowVersionRow.flow_id == flow_id)) or 0
        row = FlowVersionRow(
            id=new_id(),
            flow_id=flow_id,
            version=latest + 1,
            definition=definition,
            structure=structure,
            note=note,
            created_at=now(),
        )
        s.add(row)
        s.flush()
        return _flow_version(row, flow.name)


def get_flow_version(db: Database, version_id: str) -> FlowVersion:
    with db.session(write=False) as s:
        row = s.get(FlowVersionRow, version_id)
        if row is None:
            raise NotFoundError(f"no flow version with id {version_id!r}")
        return _flow_version(row, row.flow.name)


def latest_flow_version(db: Database, flow_id: str) -> FlowVersion:
    with db.session(write=False) as s:
        flow = s.get(FlowRow, flow_id)
        if flow is None:
            raise NotFoundError(f"no flow with id {flow_id!r}; list flows with `python -m core flows list`")
        row = s.scalars(
            select(FlowVersionRow)
            .where(FlowVersionRow.flow_id == flow_id)
            .order_by(FlowVersionRow.version.desc())
            .limit(1)
        ).one()
        return _flow_version(row, flow.name)


def list_flows(db: Database) -> list[FlowVersion]:
    """The latest version of every flow, newest flow first."""
    with db.session(write=False) as s:
        latest = (
            select(FlowVersionRow.flow_id, func.max(FlowVersionRow.version).label("v"))
            .group_by(FlowVersionRow.flow_id)
            .subquery()
        )
        rows = s.execute(
            select(FlowVersionRow, FlowRow.name)
            .join(latest, (FlowVersionRow.flow_id == latest.c.flow_id) & (FlowVersionRow.version == latest.c.v))
            .join(FlowRow, FlowRow.id == FlowVersionRow.flow_id)
            .order_by(FlowRow.created_at.desc())
        ).all()
        return [_flow_version(r, name) for r, name in rows]


def find_flow_by_name(db: Database, name: str) -> FlowVersion | None:
    with db.session(write=False) as s:
        flow_id = s.scalar(select(FlowRow.id).where(FlowRow.name == name).order_by(FlowRow.created_at).limit(1))
    return latest_flow_version(db, flow_id) if flow_id else None
