import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gem.errors import InvalidInput
from gem.text import name_key, normalise, tokens, value_text


def test_title_variants_normalise_equal():
    variants = ["Website Redesign", "website-redesign!", " WEBSITE  redesign", "Website_Redesign."]
    assert {normalise(v) for v in variants} == {"website redesign"}


def test_unicode_compatibility_and_case():
    # Full-width letters, ligatures and German sharp s fold to their plain forms.
    assert normalise("ＷＥＢＳＩＴＥ ﬁle") == "website file"
    assert normalise("Straße") == normalise("STRASSE") == "strasse"
    assert normalise("Ｃafé") == normalise("CAFÉ")
    # Decomposed and precomposed accents are the same word.
    assert normalise("cafe\u0301") == normalise("caf\u00e9")


def test_separators_and_invisible_characters():
    assert normalise("a\tb\nc\u00a0d\u2003e") == "a b c d e"
    assert normalise("co\u00adoperate") == "cooperate"  # soft hyphen sits inside the word
    assert normalise("foo\u200bbar") == "foo bar"  # zero width space is a boundary
    assert normalise("deadline: 2026-03-15 (firm)") == "deadline 2026 03 15 firm"
    assert normalise("") == "" and normalise("  !!! ... ") == ""


def test_non_latin_words_stay_whole():
    # Vowel signs (category Mc/Mn) must not split Devanagari words.
    assert tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert tokens("Привет, МИР!") == ["привет", "мир"]


def test_tokens_keep_duplicates_and_order():
    assert tokens("The deadline, the DEADLINE.") == ["the", "deadline", "the", "deadline"]
    assert tokens("") == []


def test_normalise_rejects_non_str():
    with pytest.raises(InvalidInput):
        normalise(None)  # type: ignore[arg-type]


@given(st.text())
def test_normalise_is_idempotent_and_canonical(s):
    n = normalise(s)
    assert normalise(n) == n
    assert n == n.strip() and "  " not in n
    assert tokens(s) == n.split()


def test_name_keys_ignore_spelling_but_keep_symbols():
    same = ["Website Redesign", " website-redesign! ", "WEBSITE_REDESIGN", "'Website  Redesign'",
            "Ｗebsite Redesign"]
    assert {name_key(v) for v in same} == {"website redesign"}
    different = ["C#", "C++", "C", "🚀", "🎉", "???", "★", "...", "Launch 🚀", "Launch"]
    assert len({name_key(v) for v in different}) == len(different)
    assert name_key("Dog name") == name_key("dog-name") == "dog name"
    # The words are the same: the lexical index and the embedder still see one text.
    assert tokens("C#") == tokens("C++") and tokens("Launch 🚀") == tokens("Launch")


@given(st.text(min_size=1).filter(lambda s: s.strip()))
def test_name_key_is_idempotent_and_never_empty(s):
    key = name_key(s)
    assert key and name_key(key) == key


def test_value_text_scalars():
    assert value_text("March 15") == "March 15"
    assert value_text(True) == "true" and value_text(False) == "false"
    assert value_text(42) == "42"
    assert value_text(15.0) == "15"
    assert value_text(3.25) == "3.25"
    assert value_text(None) == ""
    assert value_text(math.inf) == "inf"


def test_value_text_containers():
    v = {"deadline": "March 15", "owners": ["Ana", "Bo"], "budget": 1200.5, "done": False, "x": None}
    assert value_text(v) == "deadline March 15 owners Ana Bo budget 1200.5 done false x"
    assert value_text([]) == "" and value_text({}) == ""
    assert tokens(value_text({"a": {"b": [1, [2, "c"]]}})) == ["a", "b", "1", "2", "c"]


def test_value_text_rejects_non_json():
    with pytest.raises(InvalidInput):
        value_text(object())
    with pytest.raises(InvalidInput):
        value_text({("a", "b"): 1})
    cyclic: list = [1]
    cyclic.append(cyclic)
    with pytest.raises(InvalidInput):
        value_text(cyclic)


def test_value_text_repeated_container_is_not_a_cycle():
    shared = ["x"]
    assert value_text([shared, shared]) == "x x"
