"""The tests, one folder per package of the core; pages/ (AppTest) and browser/ (Chromium) for the app;
reference/ runs the real platforms beside MemLens; the helpers every test shares at the top.

Where each rule lives:

* The OpenAI Agents SDK's, LlamaIndex's and LangGraph/langmem's memory as their Python runs it: the pinned
  packages (the Agents SDK in an environment of its own), the drivers, the generated cases, the recorded
  outcomes: `tests/reference/python/` (its README lists what runs and what the real code showed),
  `tests/reference/python_packages.py` (install, run), `tests/reference/platform_cases.py`,
  `tests/reference/platform_outcomes.py`, `scripts/refresh_python_reference_outcomes.py`.
* n8n's and Flowise's memory as their JavaScript runs it: the pinned npm packages and platform files, the
  drivers, the generated cases, the recorded outcomes: `tests/reference/js/` (its README lists what runs and
  what the real code showed), `tests/reference/js_packages.py` (install, run),
  `tests/reference/platform_cases.py`, `tests/reference/platform_outcomes.py`,
  `scripts/refresh_js_reference_outcomes.py`.
* No import cycles in `core/`: `tests/test_import_cycles.py`.
"""
