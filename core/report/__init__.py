"""Reports: a comparison and its findings as one self-contained HTML file, and a JSON bundle that loads
back into the same view: building one (``build``), the HTML file (``html``) and the bundle
(``bundle``); the package's exceptions in ``errors``.

Where each rule lives:

* Reports: building / HTML and SVG (reason and config colours) / the JSON bundle: `core/report/build.py` /
  `core/report/html.py` / `core/report/bundle.py`.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "build": ("DEFAULT_CONFIGS", "REPORT_COLUMNS", "REPORT_ROWS", "build_report"),
        "bundle": ("FORMAT", "bundle_json", "parse_report"),
        "errors": ("BundleFieldError", "ReportError"),
        "html": ("CONFIG_COLOURS", "REASON_COLOURS", "REASON_ORDER", "report_html"),
    },
)
