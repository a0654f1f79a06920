"""Large files import record by record and report progress for a progress bar."""

import json

from core.io import MAX_IMPORT_BYTES, import_bytes, import_file
from tests.conftest import FIXTURES


def record(i: int) -> str:
    turns = []
    for t in range(8):
        turns += [
            {"from": "human", "value": f"question {i}.{t} " + "about memory windows " * 20},
            {"from": "gpt", "value": f"answer {i}.{t} " + "the window keeps the last turns " * 40},
        ]
    return json.dumps({"id": f"c{i}", "conversations": turns})


def check_progress(calls, total):
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(set(done)) == len(done)
    assert all(t == total for _, t in calls)
    assert len(calls) <= 205  # a progress bar, not a flood of callbacks


def test_a_file_near_50_mb_imports_with_progress(tmp_path):
    line = record(0)
    count = (49 * 1024 * 1024) // (len(line) + 1)
    path = tmp_path / "big.jsonl"
    with path.open("w") as fh:
        for i in range(count):
            fh.write(record(i) + "\n")
    size = path.stat().st_size
    assert 45 * 1024 * 1024 < size <= MAX_IMPORT_BYTES
    calls = []
    result = import_file(path, on_progress=lambda done, total: calls.append((done, total)))
    assert len(result.conversations) == result.records == count
    assert result.conversations[-1].id == f"c{count - 1}" and len(result.conversations[-1].turns) == 8
    check_progress(calls, size)
    assert len(calls) > 100  # updates along the way, not only at the end


def test_a_top_level_array_reports_progress_element_by_element():
    data = ("[" + ",\n".join(record(i) for i in range(300)) + "]").encode()
    calls = []
    result = import_bytes(data, "arr.json", on_progress=lambda d, t: calls.append((d, t)))
    assert len(result.conversations) == 300
    check_progress(calls, len(data))
    assert len(calls) > 100


def test_progress_is_reported_for_documents_and_non_ascii_text():
    calls = []
    path = FIXTURES / "transcripts" / "llamafactory__glaive_toolcall_zh_demo.subset.json"
    import_file(path, skip_bad=True, on_progress=lambda d, t: calls.append((d, t)))
    check_progress(calls, path.stat().st_size)
    calls.clear()
    path = FIXTURES / "transcripts" / "bfcl__memory_notetaker.json"
    import_file(path, on_progress=lambda d, t: calls.append((d, t)))
    check_progress(calls, path.stat().st_size)
