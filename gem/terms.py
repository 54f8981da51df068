"""Search terms: what the unit index and the default embedder (v2) count as a text's words.

`gem.text.normalise` decides when two names are the same (the resolver's question) and must
keep every word. Search asks another question, which words say what a text is about, so it
drops the words every English sentence has ("what", "did", "the": on conversational text they
were most of the tokens, and a question shares them with every turn) and folds the commonest
inflections together ("painted", "paints", "painting" -> "paint"), so a question in one tense
finds a sentence in another. The folding is deliberately light (a few suffixes, never below a
four-letter stem): an aggressive stemmer merges unrelated words, and the character trigrams of
the embedder already catch the rest.
"""
from __future__ import annotations

from functools import lru_cache

from gem.text import tokens

__all__ = ["STOP_WORDS", "content_words", "search_terms", "stem"]

# The closed-class words of English (articles, pronouns, auxiliaries, prepositions,
# conjunctions, question words) and a few conversational fillers. Content words such as
# "time", "work" or "new" stay: a question about them is about them.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can could couldn did didn do does doesn doing don down during
each few for from further had hadn has hasn have haven having he her here hers herself him
himself his how i if in into is isn it its itself just let ll me might more most mustn my myself
no nor not now of off on once only or other ought our ours ourselves out over own re s same
shall shan she should shouldn so some such t than that the their theirs them themselves then
there these they this those through to too under until up very was wasn we were weren what when
where which while who whom why will with won would wouldn you your yours yourself yourselves
ve d m y oh ok okay yeah yes hey hi hello wow um uh really also
""".split())

_SUFFIXES = ("ing", "ed", "es", "s")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix folding: plural and -ed/-ing endings are cut (never below a three-letter
    stem), "ies" -> "y", a doubled final consonant is undone ("planning" -> "plan") and a final
    "e" dropped, so "hope", "hoped" and "hoping" all give "hop"."""
    if len(word) < 4 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    base = word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word[-2] in "su":  # "class", "bus", "focus"
                break
            base = word[: -len(suffix)]
            if suffix in ("ing", "ed") and len(base) >= 4 and base[-1] == base[-2] \
                    and base[-1] not in "aeiouls":
                base = base[:-1]
            break
    if len(base) > 3 and base.endswith("e"):
        base = base[:-1]
    return base


def search_terms(text: str) -> list[str]:
    """The searchable words of `text`, in order (duplicates kept: BM25 counts them): its
    normalised tokens without stop words, each lightly stemmed. A text made only of stop words
    keeps them ("who are you" is still a question about something)."""
    words = tokens(text)
    kept = [stem(w) for w in words if w not in STOP_WORDS]
    return kept if kept or not words else [stem(w) for w in words]


def content_words(text: str, limit: int) -> str:
    """`text` compacted: its distinct words that are not stop words, in the order said, at
    most `limit` (all its distinct words when it has only stop words). What a compressed
    episode is searched by: what it is about, without the words every sentence has."""
    words = tokens(text)
    kept = [w for w in words if w not in STOP_WORDS] or words
    return " ".join(list(dict.fromkeys(kept))[:limit])
