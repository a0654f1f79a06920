"""Conversations in and out: every format MemLens reads (``readers/``, one module per format), the
MemLens conversation export (``bundle``); the package's exceptions in ``errors`` (with those of
:mod:`core.service.dify_pull`, which reads a running Dify app through these readers).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "bundle": ("FORMAT", "FORMAT_VERSION", "is_bundle", "looks_like_bundle", "parse_bundle", "validate_bundle"),
    "errors": ("BundleError", "FormatError", "PullError", "PullFailedError", "RecordError"),
    "readers.common": ("conversation_from_messages",),
    "readers.dify_messages": ("dify_turn",),
    "readers.records": ("MAX_PROBLEMS", "Problem", "ReadContext", "Record", "Records"),
    "readers.registry": ("FORMATS", "MAX_IMPORT_BYTES", "Format", "ImportResult", "detect_format", "formats",
                         "import_bytes", "import_file", "import_text", "parse_conversations", "read_conversations",
                         "read_file", "register_format", "unregister_format", "UPLOAD_EXTENSIONS"),
})
