"""Conversations in and out: every format MemLens reads (``readers``), the MemLens conversation export
(``bundle``) and pulling from a running Dify app (``pull``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "bundle": ("FORMAT", "FORMAT_VERSION", "is_bundle", "looks_like_bundle", "parse_bundle", "validate_bundle"),
    "pull": ("TIMEOUT_SECONDS",),
    "readers": ("FORMATS", "FormatError", "MAX_IMPORT_BYTES", "formats", "import_bytes", "import_file",
                "read_conversations", "read_file"),
})
