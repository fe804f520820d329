"""Documents in: the file readers (JSONL, CSV/TSV, Parquet, text), the row checks every row
passes, sentence-pair files and training pairs. Nothing here writes an index."""
