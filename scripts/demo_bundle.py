"""Write the demo's prepared bundle, ``sample_data/demo/seed.json``: the demo played in a scratch store.

A fresh install loads the bundle instead of playing the demo (``core.service.samples.seed_demo``), so its
first page opens quickly. Run this after a change to the sample flows, the demo model or anything that
changes what the demo's turns record; ``tests/service/test_demo_bundle.py`` fails until then::

    .venv/bin/python scripts/demo_bundle.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from core.service.samples import DEMO_BUNDLE, demo_bundle, play_demo
    from core.service.sessions import ConversationService
    from core.store.db import Database

    with tempfile.TemporaryDirectory(prefix="memlens-demo-") as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'demo.db'}")
        service = ConversationService(db)
        play_demo(service)
        doc = demo_bundle(service)
        db.dispose()
    DEMO_BUNDLE.parent.mkdir(parents=True, exist_ok=True)
    DEMO_BUNDLE.write_text(json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(
        f"wrote {DEMO_BUNDLE.relative_to(ROOT)}: {len(doc['conversations'])} conversations, {len(doc['flows'])} flows, "
        f"{len(doc['memories'])} long-term memories"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
