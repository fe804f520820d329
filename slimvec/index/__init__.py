"""The index as a folder: its manifest, layout and checksums, its locks, opening and searching it
(:mod:`.folder`), its lifecycle reads and changes (:mod:`.lifecycle`), its records and kept full
vectors. The one writer that changes it lives in :mod:`slimvec.indexer`."""
