"""Text to ids: SentencePiece and WordPiece tokenizers with the original's rules, and the same in a TF graph."""
