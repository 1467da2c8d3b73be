"""Identity of data: canonical row text (dsv-canon/1), partition and content hashes, the compiled encoder, the row gather, conformance."""
