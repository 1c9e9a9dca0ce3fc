"""Sentence-pair data sets: what one is (``types``), the ``--data.*`` flags that name one
(``spec``), the strict TSV reader (``reader``), the named data sets (``mrpc``, ``tsv``) and their
registry (``registry``)."""
