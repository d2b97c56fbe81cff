"""Text and tokens: the tokenizers (the offline Qwen default built by ``qwen_vocab``, any Hugging Face one), the
readable text of each token, and the splits of a transcript into role segments (ChatML messages, tagged text)."""
