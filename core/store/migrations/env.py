"""Alembic environment: migrations always run on the connection MemLens hands over."""

from alembic import context

from core.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - MemLens always passes its connection
    raise RuntimeError("run migrations through core.store.migrate.upgrade()")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    transactional_ddl=True,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
