import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
