"""`user report RUN_DIR`: a run directory (what `user bringup --run-dir` writes) as one self-contained HTML page
and a one-image PNG summary. `run_dir` loads the directory into typed data (what is missing becomes a note, never
an exception), `series` computes what is drawn, `plots` draws it (matplotlib, imported only when drawing),
`page` writes the HTML, `summary` the PNG and `write` puts them together."""
