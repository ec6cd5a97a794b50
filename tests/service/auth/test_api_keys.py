"""COPPICE_API_KEYS: the forms it takes, what is kept of a key, and how a key is looked up."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from service import api_keys
from service.api_keys import ApiKey, KeyRing, Role, digest_of
from service.cli import main
from service.config import Settings

SECRET = "s3cret-Hq7Wm2Xp9Lk4"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def test_compact_form_from_the_environment(
    coppice_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = _digest("third")
    monkeypatch.setenv(
        "COPPICE_API_KEYS", f" {SECRET}:admin , other:key:predict,sha256:{digest.upper()}:predict "
    )

    keys = Settings().api_keys

    assert keys == [
        ApiKey(sha256=_digest(SECRET), role=Role.ADMIN),
        # Only the text after the last colon is the role; a key may hold colons.
        ApiKey(sha256=_digest("other:key"), role=Role.PREDICT),
        ApiKey(sha256=digest, role=Role.PREDICT),
    ]


def test_json_form_with_names(coppice_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    digest = _digest("second")
    monkeypatch.setenv(
        "COPPICE_API_KEYS",
        json.dumps(
            [
                {"key": SECRET, "role": "admin", "name": "ci"},
                {"sha256": digest, "role": "predict"},
            ]
        ),
    )

    keys = Settings().api_keys

    assert [(key.sha256, key.role, key.label) for key in keys] == [
        (_digest(SECRET), Role.ADMIN, "ci"),
        (digest, Role.PREDICT, f"sha256:{digest[:8]}"),
    ]


def test_unset_or_empty_means_no_keys(coppice_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().api_keys == []
    monkeypatch.setenv("COPPICE_API_KEYS", "  ")
    assert Settings().api_keys == []


def test_only_digests_are_kept(coppice_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPPICE_API_KEYS", f"{SECRET}:admin")

    settings = Settings()

    assert SECRET not in repr(settings)
    assert SECRET not in json.dumps(settings.model_dump(mode="json"))
    assert _digest(SECRET) not in repr(settings), "not even the digest is in the repr"
    # The CLI re-validates a dump of the settings (`serve --port`); digests survive that.
    assert Settings.model_validate(settings.model_dump()).api_keys == settings.api_keys


@pytest.mark.parametrize(
    "value",
    [
        f"{SECRET}:owner",  # unknown role
        f"{SECRET}",  # no role
        f"{SECRET}:admin,{SECRET}:predict",  # the same key twice
        json.dumps([{"key": SECRET + " with spaces", "role": "admin"}]),
        json.dumps([{"key": SECRET, "sha256": _digest(SECRET), "role": "admin"}]),
        json.dumps([{"key": SECRET, "role": "admin", "colour": "red"}]),
        '[{"key": "' + SECRET,  # broken JSON
        json.dumps({"key": SECRET, "role": "admin"}),  # an object, not a list
    ],
)
def test_invalid_keys_are_refused_without_repeating_them(
    value: str, coppice_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPPICE_API_KEYS", value)

    with pytest.raises(ValidationError) as error:
        Settings()

    assert "api_keys" in str(error.value)
    assert "s3cret" not in str(error.value)


def test_cli_reports_invalid_keys_without_repeating_them(
    coppice_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPPICE_API_KEYS", f"{SECRET}:superuser")

    assert main(["migrate"]) == 2

    captured = capsys.readouterr()
    assert "invalid configuration" in captured.err
    assert "s3cret" not in captured.out + captured.err


def test_authenticate_finds_each_key() -> None:
    keys = [
        ApiKey(sha256=digest_of("one"), role=Role.ADMIN),
        ApiKey(sha256=digest_of("two"), role=Role.PREDICT, name="two"),
    ]
    ring = KeyRing(keys)

    assert ring.authenticate("one") == keys[0]
    assert ring.authenticate("two") == keys[1]
    assert ring.authenticate("three") is None
    assert ring.authenticate("") is None
    assert ring.authenticate("one ") is None


@pytest.mark.parametrize("presented", ["key-0", "key-3", "key-7", "no-such-key"])
def test_every_configured_key_is_compared_every_time(
    presented: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No early exit: the work done does not depend on which key (if any) matched."""
    ring = KeyRing([ApiKey(sha256=digest_of(f"key-{i}"), role=Role.PREDICT) for i in range(8)])
    compared: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def counting_compare(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(api_keys.hmac, "compare_digest", counting_compare)

    found = ring.authenticate(presented)

    assert (found is None) == (presented == "no-such-key")
    assert len(compared) == 8
    # Fixed-length digests on both sides: compare_digest's time leaks no length either.
    assert {len(a) for a, _ in compared} == {len(b) for _, b in compared} == {32}
    assert {b for _, b in compared} == {bytes.fromhex(digest_of(f"key-{i}")) for i in range(8)}
