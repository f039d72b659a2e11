"""The parameter's format: keys, one value's packing, and a published spec read back."""

from __future__ import annotations

import random

import pytest

from extender.core.parameter import (
    TIME_EPOCH,
    PublishedTable,
    ValueLayout,
    platform_of_text,
    platform_text,
    read_spec,
    table_key,
)
from extender.core.platforms import Platform, parse

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "key"),
    [
        ("nginx:1.27", "nginx:1.27"),
        ("registry.example:5000/team/app:1.0", "registry.example:5000/team/app:1.0"),
        (f"repo:tag@{DIGEST}", f"@{DIGEST}"),
        (f"other.example/repo@{DIGEST}", f"@{DIGEST}"),
        (f"repo:{'x' * 128}@{DIGEST}", f"@{DIGEST}"),
        # A tag that reads like a digest stays a reference: no '@', no collision.
        (DIGEST, DIGEST),
    ],
)
def test_a_digest_pinned_reference_is_listed_by_its_digest_however_it_is_spelled(
    image: str, key: str
) -> None:
    """Every spelling of one digest is one key, from the '@'; other references are their own."""
    assert key == table_key(image)


def test_a_value_packs_bits_native_bits_set_and_time_and_gives_them_back() -> None:
    """Pack then unpack is the identity for every part, at the layout's bounds too."""
    rng = random.Random(7)
    for platforms in range(1, 10):
        layout = ValueLayout(platforms)
        assert layout.packs
        for _ in range(200):
            supported = rng.getrandbits(platforms)
            native = rng.getrandbits(platforms) & supported
            index = rng.randrange(1 << 14)
            when = float(TIME_EPOCH + rng.randrange(1, 1 << 31))
            value = layout.pack(supported, native, index, when)
            assert 0 <= value < 1 << 63
            assert (supported, native, index, when) == tuple(layout.unpack(value))


def test_cel_reads_each_platform_bit_of_a_packed_value_by_division() -> None:
    """The policy reads `(value / bit) % 2` and `(value / nativeBit) % 2`: the parts above
    the bits never change what it reads."""
    rng = random.Random(11)
    for platforms in range(1, 10):
        layout = ValueLayout(platforms)
        for _ in range(200):
            supported = rng.getrandbits(platforms)
            native = rng.getrandbits(platforms) & supported
            value = layout.pack(supported, native, rng.randrange(1 << 14), TIME_EPOCH + 99.0)
            for i in range(platforms):
                bit, native_bit = 1 << i, 1 << (i + layout.native_shift)
                assert (supported >> i & 1, native >> i & 1) == (
                    value // bit % 2,
                    value // native_bit % 2,
                )


def test_past_nine_platforms_a_value_carries_its_bits_alone() -> None:
    """Ten platforms leave no room for the set and the time: neither is packed."""
    layout = ValueLayout(10)
    value = layout.pack(0b1010, 0b0010, 5, TIME_EPOCH + 50.0)
    assert (False, (0b1010, 0b0010, 0, 0.0)) == (layout.packs, tuple(layout.unpack(value)))


def test_a_platform_is_written_with_every_part_and_read_back_exactly() -> None:
    """Variant and os.version survive; trailing empty parts are not written."""
    for platform in (
        parse("linux/amd64"),
        parse("linux/arm/v7"),
        Platform("windows", "amd64", "", "10.0.17763.1234"),
    ):
        assert platform == platform_of_text(platform_text(platform))
    assert "linux/amd64" == platform_text(parse("linux/amd64"))


def spec(images: dict[str, int], sets: list[list[str]], layout: bool = True) -> PublishedTable:
    platforms = [
        {"os": "linux", "architecture": "amd64", "bit": 1, "nativeBit": 4},
        {"os": "linux", "architecture": "arm64", "bit": 2, "nativeBit": 8},
    ]
    document: dict[str, object] = {"platforms": platforms, "platformSets": sets, "images": images}
    if layout:
        document["layout"] = {"setShift": 4, "timeShift": 18, "timeEpoch": TIME_EPOCH}
    return PublishedTable.of(read_spec(document))


def test_a_published_spec_gives_each_key_its_exact_set_not_its_bits() -> None:
    """The value's set index names the set the leader resolved (with an os.version and
    entries the cluster lacks), not the cluster platforms its bits project it on."""
    layout = ValueLayout(2)
    table = spec(
        {"a:1": layout.pack(0b11, 0b11, 1, TIME_EPOCH + 10.0), "b:1": layout.pack(1, 1, 0, 0)},
        [["linux/amd64", "linux/s390x", "windows/amd64//10.0.17763.1234"]],
    )
    windows = Platform("windows", "amd64", "", "10.0.17763.1234")
    expected = frozenset({parse("linux/amd64"), windows, parse("linux/s390x")})
    assert expected == table.platforms_of("a:1")
    assert (None, None) == (table.platforms_of("b:1"), table.platforms_of("c:1"))
    assert TIME_EPOCH + 10.0 == table.unpacked("a:1").resolved_at  # type: ignore[union-attr]


def test_a_spec_written_before_the_layout_gives_bits_and_no_set() -> None:
    """An older archfit's values are the supported bits alone: no set, no time."""
    table = spec({"a:1": 3}, [], layout=False)
    assert (None, (3, 3, 0, 0.0)) == (table.platforms_of("a:1"), tuple(table.unpacked("a:1")))  # type: ignore[arg-type]
