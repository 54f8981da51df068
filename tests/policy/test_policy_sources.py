"""read_sources, the one reader of policy files: what it refuses, and how."""
from __future__ import annotations

from pathlib import Path

import pytest

from gem.errors import InvalidInput, PolicySyntaxError
from gem.policy import Source, default_policy_path, default_sources, load, read_sources


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def test_reads_files_in_order_as_given(tmp_path):
    a = write(tmp_path, "a.policy", "SET half_life = 1d\n")
    b = write(tmp_path, "b.policy", "# é\n")
    sources = read_sources([a, str(b)])
    assert sources == [Source.of(str(a), "SET half_life = 1d\n"), Source.of(str(b), "# é\n")]
    assert read_sources(p for p in [a]) == sources[:1]  # any iterable of paths
    assert read_sources([]) == []


@pytest.mark.parametrize("bad", ["file.policy", b"file.policy", Path("file.policy")])
def test_one_path_instead_of_a_list_is_refused_naming_the_argument(bad):
    with pytest.raises(InvalidInput) as info:
        read_sources(bad)
    assert str(info.value) == (f"paths must be a list of policy file paths, not one {type(bad).__name__}: "
                               f"write [{bad!r}]")
    with pytest.raises(InvalidInput, match="^policies must be a list"):
        read_sources(bad, argument="policies")


@pytest.mark.parametrize("bad,kind", [(None, "NoneType"), (5, "int"), (b"a.policy", "bytes")])
def test_an_item_that_is_not_a_path_is_refused_naming_its_index(tmp_path, bad, kind):
    good = write(tmp_path, "a.policy", "")
    with pytest.raises(InvalidInput) as info:
        read_sources([good, bad])
    assert str(info.value) == f"paths[1] must be a path (str or os.PathLike), got {kind}"


def test_not_a_list_at_all_and_an_empty_path():
    with pytest.raises(InvalidInput, match="^paths must be a list of policy file paths, got int$"):
        read_sources(5)
    with pytest.raises(InvalidInput, match=r"^paths\[0\] is an empty path$"):
        read_sources([""])


def test_missing_and_unreadable_files_are_invalid_input(tmp_path):
    with pytest.raises(InvalidInput) as info:
        read_sources([tmp_path / "nope.policy"])
    assert str(info.value) == f"paths[0]: no such policy file: {tmp_path / 'nope.policy'}"
    with pytest.raises(InvalidInput) as info:
        read_sources([tmp_path])
    assert str(info.value) == f"paths[0]: {tmp_path} is a directory, not a policy file"
    with pytest.raises(InvalidInput) as info:
        read_sources([tmp_path / "nope.policy"], argument=None)  # the command line names only the file
    assert str(info.value) == f"no such policy file: {tmp_path / 'nope.policy'}"


def test_a_file_that_is_not_utf8_is_a_diagnostic_at_the_first_bad_byte(tmp_path):
    latin1 = write(tmp_path, "latin1.policy", 'SET x = 1\nPOLICY p ON tick DO reject("café")\n'.encode("latin-1"))
    also = write(tmp_path, "also.policy", b"\xff\xfe# utf-16?\n")
    with pytest.raises(PolicySyntaxError) as info:
        read_sources([latin1, also])
    assert str(info.value) == (
        f"{latin1}:2:32: gem_not_utf8: the file is not UTF-8: byte 0xe9 (invalid continuation byte)\n"
        'POLICY p ON tick DO reject("caf\ufffd")\n'
        "                               ^\n"
        "hint: save the file as UTF-8\n"
        f"{also}:1:1: gem_not_utf8: the file is not UTF-8: byte 0xff (invalid start byte)\n"
        "\ufffd\ufffd# utf-16?\n"
        "^\n"
        "hint: save the file as UTF-8"
    )
    with pytest.raises(PolicySyntaxError, match="gem_not_utf8"):
        load([latin1])


def test_argument_errors_come_before_any_file_is_decoded(tmp_path):
    latin1 = write(tmp_path, "latin1.policy", "# café".encode("latin-1"))
    with pytest.raises(InvalidInput, match="no such policy file"):
        read_sources([latin1, tmp_path / "nope.policy"])


def test_default_sources_are_the_shipped_default_policy():
    (source,) = default_sources()
    assert source == Source.of(str(default_policy_path()), default_policy_path().read_text(encoding="utf-8"))
