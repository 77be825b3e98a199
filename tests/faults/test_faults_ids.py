"""Test names without Latin letters get ids of their own. Every name that slugging emptied
(Cyrillic, Chinese, emoji, accented-only) had the id `<suite>::_`, so all but one were load
errors whose advice, "rename one", could not help; ids of names in the Latin script stay byte for
byte what they were (stored results and Dagster partitions keep their keys)."""

from __future__ import annotations

import json
import re

import pytest

from agent_health import load_tests
from agent_health.loader import slug
from agent_health.stores import LocalResultStore
from tests.faults.dagster_project import dagster_instance, evaluate, keys_of, pipeline_for, register
from tests.faults.lifecycle import budget, jsonl_results
from tests.support.cli import cli_in_process

NAMES = [
    "Проверка оплаты",  # Cyrillic
    "Проверка доставки",
    "支付服务故障",  # Chinese
    "支付延迟",
    "🚀",  # emoji
    "🔥",
    "éé",  # accented only
    "èè",
    "Тест 1",  # another script with a digit: the digit alone was its id
    "Проверка 1",
    "Группа > тест",  # describe levels: one part each
]


def test_names_without_latin_letters_get_distinct_ids_and_all_run(tmp_path, evals):
    evals("intl.json", json.dumps([{"name": n, "prompt": "Why is checkout slow?"} for n in NAMES]))
    loaded = load_tests([tmp_path / "evals"])
    assert [str(e) for e in loaded.errors] == []
    ids = [t.case.id for t in loaded.tests]
    assert len(set(ids)) == len(NAMES), ids
    assert all(re.fullmatch(r"intl::[a-z0-9_/-]+", i) for i in ids), ids  # a store key, a file name, a partition key
    p = cli_in_process("run", "evals", "--no-judge", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode in (0, 1), p.stdout + p.stderr  # every test ran: no load error
    assert sorted(jsonl_results(tmp_path / "r.jsonl")) == sorted(NAMES)
    stored = LocalResultStore(tmp_path / ".agent_health" / "results").list(suite="intl")
    assert len(stored) == len(NAMES)


def test_one_suite_of_such_names_in_a_code_file_loads_every_test(tmp_path, evals):
    code = "".join(f"@test({n!r})\ndef t{i}():\n    pass\n\n\n" for i, n in enumerate(NAMES) if " > " not in n)
    evals("intl.eval.py", "from agent_health import test\n\n\n" + code)
    loaded = load_tests([tmp_path / "evals"])
    assert [str(e) for e in loaded.errors] == []
    assert len({t.case.id for t in loaded.tests}) == len(NAMES) - 1


def test_such_ids_are_dagster_partitions_of_their_own(tmp_path, evals):
    evals("intl.json", json.dumps([{"name": n, "prompt": "Why is checkout slow?"} for n in NAMES]))
    pipeline = pipeline_for(tmp_path)
    with dagster_instance(tmp_path) as instance:
        assert register(instance, pipeline) == []
        keys = keys_of(instance, pipeline, "intl")
        assert keys == [slug(n) for n in NAMES]  # in file order, one per test
        found = evaluate(instance, pipeline, "intl", ["demo@v2"])
        assert sorted(found) == sorted(f"demo@v2|{k}" for k in keys)
        assert {meta["status"] for meta in found.values()} <= {"passed", "failed"}


def old_slug(text: str) -> str:
    """The slug every id had before names without Latin letters were kept apart."""
    parts = [re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in text.split(" > ")]
    return "/".join(p or "_" for p in parts)


@pytest.mark.parametrize(
    "name",
    [
        "Checkout > Happy path!",
        "payment RCA identifies the DB outage",
        "A  B",
        "!!!",
        "2024",
        "café au lait",
        "Été",
        "straße",
        "deploy 🚀",
        "naïve > résumé",
        "x" * 200,
    ],
)
def test_ids_of_latin_names_stay_byte_for_byte(name):
    assert slug(name) == old_slug(name)


def test_such_ids_are_stable_and_as_documented():
    """docs/eval-files.md shows these; stored results and partitions are keyed by them."""
    assert [slug(n) for n in ("Тест", "支付", "🚀", "Группа > тест 2")] == [
        "xn--e1aybc",
        "xn--bnq875c",
        "xn--158h",
        "xn--80af0bads/xn---2-mlc2cdc",
    ]
    long = slug("支付" * 100)
    assert len(long) == 64 and long.startswith("xn--bnq") and long != slug("支付" * 99)
