"""Logged traffic where it lives: fsspec locations (memory://, a local HTTP server), streaming
Parquet / JSONL reads, field paths and seeded reservoir sampling per bucket under a memory bound."""

from __future__ import annotations

import io
import json
import threading
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from specbench.data.logged import open_logged, select_requests
from specbench.data.logged_rows import FieldNames
from specbench.data.paths import MISSING, get_path, parse_path
from specbench.data.sample import Reservoirs
from specbench.data.sources import iter_source, resolve_files
from specbench.errors import SpecbenchError

# ------------------------------------------------------------------------------ field paths


def test_field_paths_reach_nested_values() -> None:
    row = {
        "response": {"choices": [{"message": {"content": "hi"}}, {"message": {"content": "b"}}]},
        "request": {"messages": [{"role": "user", "content": "q"}]},
        "metadata": json.dumps({"category": "code"}),  # JSON text (CSV, some loggers)
        "a.b": 1,
        "odd": {"x.y": 2},
    }
    assert get_path(row, "response.choices[0].message.content") == "hi"
    assert get_path(row, "response.choices[-1].message.content") == "b"
    assert get_path(row, "request.messages") == [{"role": "user", "content": "q"}]
    assert get_path(row, "metadata.category") == "code"
    assert get_path(row, "a.b") == 1  # a flat column named like the path wins
    assert get_path(row, 'odd["x.y"]') == 2
    assert get_path(row, "response.choices[2].message") is MISSING
    assert get_path(row, "response.id") is MISSING
    assert parse_path("response.choices[0].message.content").column == "response"
    for bad in ("a..b", "a.", ".a", "[0]", "a[x]"):
        with pytest.raises(SpecbenchError, match="field path"):
            parse_path(bad)


# ------------------------------------------------------------------------------ reservoirs


def test_reservoir_keeps_k_per_bucket_in_stream_order_and_is_seeded() -> None:
    items = [("a" if i % 3 else "b", i) for i in range(300)]

    def sample(seed: int, k: int | None) -> list[int]:
        r: Reservoirs[int] = Reservoirs(k, seed)
        for bucket, i in items:
            r.add(bucket, i)
        return r.sample()

    got = sample(7, 10)
    assert len(got) == 20 and got == sorted(got)
    assert Counter(i % 3 == 0 for i in got) == {True: 10, False: 10}
    assert got == sample(7, 10) and got != sample(8, 10)
    assert sample(0, None) == list(range(300))
    assert sample(0, 1000) == list(range(300))  # k above a bucket's size keeps it all


def test_reservoir_is_uniform_by_seeded_simulation() -> None:
    """Each of N items is kept with probability k / N: inclusion counts over 2000 seeds pass a
    chi-square test (a sampler that favours early or late rows fails it)."""
    n, k, runs = 40, 5, 2000
    counts = Counter[int]()
    for seed in range(runs):
        r: Reservoirs[int] = Reservoirs(k, seed)
        for i in range(n):
            r.add("x", i)
        counts.update(r.sample())
    observed = [counts[i] for i in range(n)]
    assert sum(observed) == runs * k
    p = stats.chisquare(observed).pvalue
    assert p > 0.001, observed


# ------------------------------------------------------------------------------ remote sources


ROWS = [
    {
        "request": {"messages": [{"role": "user", "content": f"question {i}"}]},
        "response": {"choices": [{"message": {"content": f" answer {i}"}}]},
        "metadata": {"category": "code" if i % 2 else "chat"},
    }
    for i in range(10)
]
FIELDS = FieldNames(
    prompt="request.messages",
    response="response.choices[0].message.content",
    bucket="metadata.category",
    prompt_explicit=True,
)


def _parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


@pytest.fixture
def memory_logs() -> Iterator[str]:
    """Two Parquet parts of nested OpenAI-style logs on fsspec's in-memory filesystem."""
    fs = fsspec.filesystem("memory")
    root = f"/t{uuid.uuid4().hex[:8]}/logs"
    fs.pipe(f"{root}/part-0.parquet", _parquet_bytes(ROWS[:6]))
    fs.pipe(f"{root}/part-1.parquet", _parquet_bytes(ROWS[6:]))
    fs.pipe(f"{root}/notes.txt", b"not data")
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def test_memory_glob_streams_every_part_with_field_paths(memory_logs: str) -> None:
    source, rows = open_logged(f"{memory_logs}/part-*.parquet", columns=FIELDS.columns())
    sel = select_requests(source, rows, FIELDS, 0, False, None, None, 0)
    assert sel.rows_read == 10 and sel.bucket_rows == {"chat": 5, "code": 5}
    first = sel.requests[0]
    assert first.messages == [{"role": "user", "content": "question 0"}]
    assert first.response == " answer 0" and first.bucket == "chat"
    assert [r.location for r in sel.requests][5:7] == [
        "part-0.parquet row 6",
        "part-1.parquet row 1",
    ]
    # a folder reads its data files and skips the others
    assert len(resolve_files(memory_logs).paths) == 2


def test_missing_locations_and_backends_are_one_sentence(memory_logs: str) -> None:
    with pytest.raises(SpecbenchError, match="no file matches"):
        resolve_files(f"{memory_logs}/nope-*.parquet")
    with pytest.raises(SpecbenchError, match="not found"):
        resolve_files(f"{memory_logs}/nope.parquet")
    for url, package in (("s3://b/x.parquet", "s3fs"), ("gs://b/x.parquet", "gcsfs")):
        try:
            __import__(package)
        except ImportError:
            with pytest.raises(SpecbenchError, match=f"needs the '{package}' package"):
                resolve_files(url)


class _RangeHandler(SimpleHTTPRequestHandler):
    """Static files with single byte-range support (what fsspec's HTTP reader asks for)."""

    def log_message(self, *args: Any) -> None:
        pass

    def send_head(self) -> Any:
        rng = self.headers.get("Range")
        path = Path(self.translate_path(self.path))
        if not rng or not path.is_file():
            return super().send_head()
        data = path.read_bytes()
        start_s, end_s = rng.removeprefix("bytes=").split("-")
        start = int(start_s)
        end = min(int(end_s) if end_s else len(data) - 1, len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return io.BytesIO(data[start : end + 1])


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_RangeHandler, directory=str(tmp_path)))
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_http_parquet_and_jsonl_read_alike(http_root: tuple[str, Path]) -> None:
    pytest.importorskip("aiohttp")  # fsspec's HTTP backend
    url, folder = http_root
    (folder / "logs.parquet").write_bytes(_parquet_bytes(ROWS))
    (folder / "logs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))

    def read(name: str) -> list[tuple[str, str, str]]:
        source, rows = open_logged(f"{url}/{name}", columns=FIELDS.columns())
        sel = select_requests(source, rows, FIELDS, 0, False, ["code"], 3, 1)
        return [(r.messages[0]["content"], r.response, r.bucket) for r in sel.requests]

    got = read("logs.parquet")
    assert len(got) == 3 and {b for _, _, b in got} == {"code"}
    assert got == read("logs.jsonl")  # the same rows and the same seeded sample
    with pytest.raises(SpecbenchError, match="not found"):
        open_logged(f"{url}/missing.parquet")


# ------------------------------------------------------------------------------ memory bound


@pytest.mark.slow  # about 15 s: tracemalloc slows the 200 000-row pass
def test_a_large_parquet_file_is_sampled_in_bounded_memory(tmp_path: Path) -> None:
    """200 000 rows (about 60 MB as Python objects when read whole) sampled to 25 per bucket:
    the reader's Python allocations stay under 16 MB, because rows stream in batches."""
    n = 200_000
    cats = ["code", "chat", "math", "rag"]
    table = pa.table(
        {
            "prompt": pa.array([f"prompt number {i}" for i in range(n)]),
            "response": pa.array([f" response {i}" for i in range(n)]),
            "category": pa.array([cats[i % 4] for i in range(n)]),
            "unused": pa.array([f"a wide column we never decode {i}" for i in range(n)]),
        }
    )
    path = tmp_path / "big.parquet"
    pq.write_table(table, path, row_group_size=20_000)
    del table
    fields = FieldNames(bucket="category")
    tracemalloc.start()
    try:
        source, rows = open_logged(str(path), columns=fields.columns())
        sel = select_requests(source, rows, fields, 0, False, None, 25, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sel.rows_read == n and len(sel.requests) == 100
    assert Counter(r.bucket for r in sel.requests) == dict.fromkeys(cats, 25)
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    # every row of a bucket could be drawn: the sample spans the file
    assert max(int(r.location.split()[-1]) for r in sel.requests) > n // 2


def test_jsonl_streams_too(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    import gzip

    with gzip.open(path, "wt") as fh:
        for r in ROWS:
            fh.write(json.dumps(r) + "\n")
    source, rows = iter_source(str(path))
    assert source == str(path) and sum(1 for _ in rows) == 10
