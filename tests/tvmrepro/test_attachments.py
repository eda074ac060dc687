"""A case's files: the caps and names at validation, the cache key, and the store's blobs (each
content once, by SHA-256) on real SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV
from tvmrepro.attachments import (
    WITH_CONTENTS,
    attach,
    read_files,
    require_contents,
    with_contents,
    without_contents,
)
from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.lifecycle import cache_key
from tvmrepro.settings import MAX_FILE_BYTES, MAX_FILES, MAX_FILES_BYTES
from tvmrepro.store import Store

SCRIPT = "import numpy as np\nprint(np.load('x.npy').sum())\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def case_with(*files: dict[str, Any]) -> dict[str, Any]:
    return {"script": SCRIPT, "files": list(files)}


def refusal(data: dict[str, Any]) -> BadInput:
    with pytest.raises(BadInput) as refused:
        parse_case(data)
    return refused.value


def test_a_file_is_kept_by_name_digest_and_size_its_content_only_when_asked() -> None:
    case = parse_case(case_with({"name": "x.npy", "content": b64(b"abc")}))
    (entry,) = case.files
    assert (entry.sha256, entry.size) == (hashlib.sha256(b"abc").hexdigest(), 3)
    assert case.model_dump(mode="json")["files"] == [
        {"name": "x.npy", "sha256": entry.sha256, "size": 3}]
    assert case.model_dump(mode="json", context=WITH_CONTENTS)["files"][0]["content"] == "YWJj"
    # Lines wrapped as the `base64` command wraps them read the same.
    wrapped = parse_case(case_with({"name": "x.npy", "content": "YW\nJj\n"}))
    assert wrapped.files[0].sha256 == entry.sha256


@pytest.mark.parametrize(("name", "why"), [
    ("../x.npy", "'/'"), ("a/b.npy", "'/'"), ("..", "'..'"), (".hidden", "starts with '.'"),
    ("x" * 129, "over the cap of 128"), ("", "empty"), ("repro.py", "harness"),
    ("tab\there", "control character")])
def test_a_name_that_is_no_plain_file_name_is_refused(name: str, why: str) -> None:
    found = refusal(case_with({"name": "ok.txt", "content": "eA=="},
                              {"name": name, "content": "eA=="}))
    assert found.field == "files[1].name" and why in found.problem


def test_bad_base64_is_refused_naming_the_file() -> None:
    found = refusal(case_with({"name": "a.pkl", "content": "not*base64"}))
    assert found.field == "files[0].content" and "not base64" in found.problem


def test_a_file_over_its_cap_is_refused_with_the_cap() -> None:
    found = refusal(case_with({"name": "big.bin", "content": b64(bytes(MAX_FILE_BYTES + 1))}))
    assert found.field == "files[0].content" and "16 MiB" in found.problem


def test_too_many_files_and_too_much_in_all_are_refused() -> None:
    many = [{"name": f"f{n}.txt", "content": "eA=="} for n in range(MAX_FILES + 1)]
    found = refusal(case_with(*many))
    assert found.field == "files" and f"cap of {MAX_FILES}" in found.problem
    each = b64(bytes(MAX_FILES_BYTES // 3 + 1))
    found = refusal(case_with(*[{"name": f"f{n}.bin", "content": each} for n in range(3)]))
    assert found.field == "files" and "32 MiB" in found.problem


def test_a_name_given_twice_is_refused_at_the_second() -> None:
    found = refusal(case_with({"name": "a.txt", "content": "eA=="},
                              {"name": "b.txt", "content": "eA=="},
                              {"name": "a.txt", "content": "eQ=="}))
    assert found.field == "files[2].name" and "files[0]" in found.problem


def test_the_files_are_part_of_the_cache_key() -> None:
    env = default_catalog().get(NEW_ENV)

    def key(*files: dict[str, Any]) -> str:
        return cache_key(parse_case(case_with(*files)), "script", env)

    model = {"name": "x.npy", "content": b64(b"model one")}
    assert key(model) == key(dict(model))  # the same file: the same key (a cache hit)
    assert key(model) != key({**model, "content": b64(b"model two")})
    assert key(model) != key({**model, "name": "y.npy"})
    assert key(model) != cache_key(parse_case({"script": SCRIPT}), "script", env)
    # The key of a stored case (its files by digest) is the submitted case's.
    stored = without_contents(parse_case(case_with(model)))
    assert cache_key(stored, "script", env) == key(model)
    # A case without files keeps the key it had before files existed.
    plain = parse_case({"script": SCRIPT})
    assert "files" not in plain.model_dump(mode="json", exclude_defaults=True)


def test_the_store_keeps_each_content_once(store: Store) -> None:
    one, two = b"the same model" * 1000, bytes(range(256)) * 64
    digest = hashlib.sha256(one).hexdigest()
    assert store.put_blobs({digest: one}) == 1
    assert store.put_blobs({digest: one, hashlib.sha256(two).hexdigest(): two}) == 1
    with ThreadPoolExecutor(4) as pool:  # submissions of one file at once: one row
        list(pool.map(lambda _: store.put_blobs({digest: one}), range(8)))
    sizes = store.blob_sizes()
    assert sizes == {digest: len(one), hashlib.sha256(two).hexdigest(): len(two)}
    assert store.blobs([digest, "0" * 64]) == {digest: one}


def test_a_stored_case_gets_its_contents_back_by_digest(store: Store) -> None:
    case = parse_case(case_with({"name": "x.npy", "content": b64(b"\x00\x01 raw bytes")}))
    stored = without_contents(case)
    with pytest.raises(BadInput, match="files\\[0\\].*not given"):
        require_contents(stored)
    with pytest.raises(BadInput, match="no content with sha256"):
        with_contents(stored, store.blobs)
    store.put_blobs({case.files[0].digest: b"\x00\x01 raw bytes"})
    again = with_contents(stored, store.blobs)
    assert again.files[0].data() == b"\x00\x01 raw bytes"
    # Bytes that are not the digest's are not handed over as the file.
    with pytest.raises(BadInput):
        with_contents(stored, lambda digests: {d: b"other bytes" for d in digests})


def test_files_given_on_the_command_line_are_attached(tmp_path: Path) -> None:
    (tmp_path / "x.npy").write_bytes(b"numbers")
    case = attach(parse_case(case_with({"name": "x.npy", "content": "eA=="})),
                  read_files([tmp_path / "x.npy"]))
    assert [(f.name, f.data()) for f in case.files] == [("x.npy", b"numbers")]  # replaced
    with pytest.raises(BadInput) as missing:
        read_files([tmp_path / "absent.onnx"])
    assert missing.value.field == "--file" and "absent.onnx: no such file" in missing.value.problem
