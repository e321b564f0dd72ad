"""The caption tokenizer and vocabulary (``ident3d.training.text``): splitting, ordering, ids, the JSON record."""

from __future__ import annotations

import json
import random

import pytest
import torch

from ident3d.training.text import PAD, TOKENIZER, UNK, Vocabulary, longest, tokenize

CAPTIONS = ['A "dark green" teapot is at the bottom-left.',
            'The teapot, "red", is at the top-right.',
            'A "red" hare is visible at the mid-center.',
            "It's a cow."]


def test_tokenize_lower_cases_and_splits_punctuation_keeping_hyphenated_words():
    assert tokenize('A "Dark Green" Teapot is at the bottom-left.') == [
        "a", '"', "dark", "green", '"', "teapot", "is", "at", "the", "bottom-left", "."]
    assert tokenize("It's  here,\tthere!") == ["it's", "here", ",", "there", "!"]
    assert tokenize("   ") == []


def test_tokenize_never_yields_a_special_token():
    assert tokenize(f"{PAD} {UNK}") == ["<", "pad", ">", "<", "unk", ">"]


def test_longest_counts_tokens():
    assert longest(CAPTIONS) == 12  # 'a " dark green " teapot is at the bottom-left .'
    assert longest([]) == 0


def test_vocabulary_orders_by_frequency_then_alphabetically_after_pad_and_unk():
    vocab = Vocabulary.build(["b a c a b a .", "c d"])
    assert vocab.words == (PAD, UNK, "a", "b", "c", ".", "d")  # a: 3, b: 2, c: 2, then '.' < 'd' (1 each)
    assert vocab.ids[PAD] == 0 and vocab.ids[UNK] == 1 and len(vocab) == 7


def test_vocabulary_is_the_same_for_the_same_captions_in_any_order():
    shuffled = CAPTIONS[:]
    random.Random(0).shuffle(shuffled)
    assert Vocabulary.build(shuffled) == Vocabulary.build(CAPTIONS)
    assert Vocabulary.build(CAPTIONS).encode(CAPTIONS, 14).equal(Vocabulary.build(shuffled).encode(CAPTIONS, 14))


def test_min_count_drops_rare_words_to_unk():
    vocab = Vocabulary.build(["x x y", "x z"], min_count=2)
    assert vocab.words == (PAD, UNK, "x")
    assert vocab.encode(["x y z"], 4).tolist() == [[2, 1, 1, 0]]
    with pytest.raises(ValueError, match="min_count"):
        Vocabulary.build(["x"], min_count=0)


def test_encode_pads_maps_unknown_words_and_truncates():
    vocab = Vocabulary.build(["b a c a b a .", "c d"])
    ids = vocab.encode(["a b", "d e a", "", "a a a a a a"], 5)
    assert ids.dtype == torch.long and ids.shape == (4, 5)
    assert ids.tolist() == [[2, 3, 0, 0, 0], [6, 1, 2, 0, 0], [0, 0, 0, 0, 0], [2, 2, 2, 2, 2]]
    assert vocab.encode([], 3).shape == (0, 3)


def test_decode_round_trips_known_words():
    vocab = Vocabulary.build(CAPTIONS)
    ids = vocab.encode(CAPTIONS, longest(CAPTIONS) + 2)
    assert vocab.decode(ids) == [tokenize(c) for c in CAPTIONS]
    assert vocab.decode(vocab.encode(["a purple teapot"], 4)) == [["a", UNK, "teapot"]]


def test_the_record_is_json_and_round_trips():
    vocab = Vocabulary.build(CAPTIONS)
    record = json.loads(json.dumps(vocab.to_dict()))
    assert record["tokenizer"] == TOKENIZER and record["words"][:2] == [PAD, UNK]
    again = Vocabulary.from_dict(record)
    assert again == vocab and again.encode(CAPTIONS, 12).equal(vocab.encode(CAPTIONS, 12))


def test_a_record_of_another_tokenizer_or_a_malformed_word_list_is_refused():
    record = Vocabulary.build(CAPTIONS).to_dict()
    with pytest.raises(ValueError, match="tokenised with"):
        Vocabulary.from_dict({**record, "tokenizer": {"lowercase": False, "pattern": r"\S+"}})
    with pytest.raises(ValueError, match="starts with"):
        Vocabulary.from_dict({**record, "words": record["words"][1:]})
    with pytest.raises(ValueError, match="each word once"):
        Vocabulary((PAD, UNK, "a", "a"))
