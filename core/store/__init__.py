"""Persistence: flows with versions, conversations as turn trees, node runs, variables."""
